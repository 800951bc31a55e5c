#include <mrcheck/status.h>

#include <cstring>

namespace mrcheck {

status status::from_errno(std::string_view context, int err) {
  std::string msg(context);
  msg += ": ";
  msg += std::strerror(err);
  return status(std::move(msg), err);
}

status status::with_context(std::string_view context) const {
  if (is_ok()) return *this;
  std::string msg(context);
  msg += ": ";
  msg += message_;
  return status(std::move(msg), err_);
}

}  // namespace mrcheck
