// Line I/O of the rank children's control pipes, shared by the real rank and the tests' scripted stand-in
// (tests/unit/fake_nccl_rank.cpp).
#pragma once

#include <mrcheck/nccl_probe.h>

#include <string>
#include <string_view>

namespace mrcheck::detail {

// Writes all of `s` to `fd`, retrying after EINTR and short writes; stops quietly at an error (the reader is gone).
void write_all(int fd, std::string_view s);

// Writes whole lines ("stage init\n") to the control fd; errors (the orchestrator is gone) are ignored.
class control_writer {
 public:
  explicit control_writer(int fd) : fd_(fd) {}
  void line(std::string_view text) const;

 private:
  int fd_;
};

// Reads one line (without the '\n') byte-wise, so nothing past it is consumed. False on EOF/error before a
// newline or when the line exceeds `max`.
bool read_line(int fd, std::string& out, std::size_t max);

}  // namespace mrcheck::detail
