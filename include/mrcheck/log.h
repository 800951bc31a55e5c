// Where the core's messages go. Each front end picks a sink (chaos/cpuset's log_add_dest, as an interface):
// the SPANK plugin sends them to slurm_error/slurm_info/slurm_spank_log, the prolog to stderr, the CLI to stderr
// or its JSON, the tests to a vector they assert on.
#pragma once

#include <fmt/core.h>

#include <string>
#include <string_view>
#include <vector>

namespace mrcheck {

enum class log_level {
  error,    // something the admin must see
  info,     // normal operation, admin-facing
  verbose,  // detail an admin turns on
  debug,    // detail for developers
  user,     // must reach the user's terminal (srun's stderr); SPANK: slurm_spank_log
};

class log_sink {
 public:
  virtual ~log_sink() = default;
  // `line` is complete and already starts with "mrcheck: ". Must not throw.
  virtual void write(log_level level, std::string_view line) noexcept = 0;
};

// Discards everything.
class null_log final : public log_sink {
 public:
  void write(log_level, std::string_view) noexcept override {}
};

// Writes to stderr, one line per call; `min` filters out more detailed levels.
class stderr_log final : public log_sink {
 public:
  explicit stderr_log(log_level min = log_level::info) : min_(min) {}
  void write(log_level level, std::string_view line) noexcept override;

 private:
  log_level min_;
};

// Keeps every line; for tests.
class vector_log final : public log_sink {
 public:
  struct entry {
    log_level level;
    std::string line;
  };
  void write(log_level level, std::string_view line) noexcept override;
  const std::vector<entry>& lines() const { return lines_; }
  bool contains(std::string_view needle) const;

 private:
  std::vector<entry> lines_;
};

// Formats "mrcheck: " + message and writes it. Format strings are checked at compile time.
template <class... Args>
void log(log_sink& sink, log_level level, fmt::format_string<Args...> format, Args&&... args) noexcept {
  try {
    std::string line = "mrcheck: ";
    fmt::format_to(std::back_inserter(line), format, std::forward<Args>(args)...);
    sink.write(level, line);
  } catch (...) {
    sink.write(log_level::error, "mrcheck: internal error: could not format a log message");
  }
}

}  // namespace mrcheck
