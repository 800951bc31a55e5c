// Errors as values (leveldb's Status, with the errno it came from).
//
// Expected failures - a missing file, a refused syscall, a malformed config line - travel as a `status`
// or a `result<T>`, never as exceptions. Messages read "<what> <object>: <cause>", e.g.
// "read /proc/1/limits: Permission denied".
#pragma once

#include <cerrno>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace mrcheck {

class status {
 public:
  status() = default;  // ok

  static status ok() { return {}; }
  // A failure with a message and no errno (e.g. a parse error).
  static status error(std::string message) { return status(std::move(message), 0); }
  // A failure from a syscall: "<context>: <strerror(err)>"; err is kept for callers that branch on it.
  static status from_errno(std::string_view context, int err);

  bool is_ok() const { return !failed_; }
  explicit operator bool() const { return is_ok(); }
  int err() const { return err_; }
  const std::string& message() const { return message_; }

  // Prefixes the message with more context: "open config: " + message.
  status with_context(std::string_view context) const;

 private:
  status(std::string message, int err) : failed_(true), err_(err), message_(std::move(message)) {}
  bool failed_ = false;
  int err_ = 0;
  std::string message_;
};

// A value or the status that explains why there is none.
template <class T>
class result {
 public:
  result(T value) : v_(std::move(value)) {}       // NOLINT(google-explicit-constructor): by design
  result(status error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool is_ok() const { return v_.index() == 0; }
  explicit operator bool() const { return is_ok(); }

  // Precondition: is_ok(). Checked: a wrong access throws std::bad_variant_access, caught at the C ABI guard.
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }

  // The error; an ok status when there is a value.
  status error() const { return is_ok() ? status::ok() : std::get<1>(v_); }

  T value_or(T fallback) const { return is_ok() ? std::get<0>(v_) : std::move(fallback); }

 private:
  std::variant<T, status> v_;
};

}  // namespace mrcheck
