// A scripted stand-in for a rank child, so CI (no GPU) exercises the real orchestration: the same spawn,
// control pipes, unique-id relay, timeouts, crash handling and log parsing, with NCCL's output replayed from a
// captured log (tests/fixtures/nccl_logs/). Built with the tests only, never shipped: the orchestrator starts it
// in a rank's place when a test's nccl_pair_options::spawn is tests/doubles/stand_in_ranks.h's (the test program
// tests/doubles/probe_nccl_stand_in.cpp: `--stand-in PROGRAM --spec0 S --spec1 S`).
//
// usage: mrcheck_fake_nccl_rank --spec SPEC RANK-ARGS...   (RANK-ARGS as parse_nccl_rank_args reads them)
// SPEC: comma-separated key=value:
//   log=PATH       print this file to stdout (where NCCL prints its log) after the id exchange
//   action=pass    report success (default) | mismatch | fail (ncclSystemError in ncclCommInitRank) |
//          hang    (block in "init" forever) | crash (SIGSEGV in "init") | exit (exit 0 without a result) |
//          noid    (rank 0: never send the id; others: same as hang) | flood (2 MiB to stdout, then pass) |
//          early   (exit 3 with an error result before the id exchange, like a rank whose dlopen failed)
//   delay=MS       sleep this long after the log, before the action (a slow rank)
//   tag=TEXT       ignored; lets a test find its own rank processes in /proc
//   version=N      ncclGetVersion value to report (default 22803)
#include <mrcheck/nccl_probe.h>

#include "nccl/rank_io.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace mrcheck::detail {

namespace {

std::string spec_value(std::string_view spec, std::string_view key, std::string_view fallback) {
  std::size_t pos = 0;
  while (pos <= spec.size()) {
    std::size_t comma = spec.find(',', pos);
    std::string_view item = spec.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    if (item.size() > key.size() && item.substr(0, key.size()) == key && item[key.size()] == '=') {
      return std::string(item.substr(key.size() + 1));
    }
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return std::string(fallback);
}

void copy_file_to_stdout(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    std::string msg = fmt::format("mrcheck: fake rank: open {}: {}\n", path, std::strerror(errno));
    write_all(STDERR_FILENO, msg);
    return;
  }
  char buf[8192];
  ssize_t r;
  while ((r = ::read(fd, buf, sizeof buf)) > 0)
    write_all(STDOUT_FILENO, std::string_view(buf, static_cast<std::size_t>(r)));
  ::close(fd);
}

[[noreturn]] void block_forever() {
  for (;;) ::pause();
}

int fake_rank_main(const nccl_rank_args& a, const std::string& spec) {
  control_writer ctl(a.ctl_fd);
  std::string action = spec_value(spec, "action", "pass");
  nccl_rank_report r;
  r.rank = a.rank;
  r.count = a.count;
  r.nccl_library = "fake";
  r.nccl_version = std::stoi(spec_value(spec, "version", "22803"));
  r.cuda_driver_version = 13000;
  r.device = "0000:00:00.0";
  r.expected = a.nranks * (a.nranks + 1) / 2.0;
  auto result = [&](int code) {
    nlohmann::json j = r;
    ctl.line("result " + j.dump());
    return code;
  };

  ctl.line("stage load");
  if (action == "early") {
    r.stage = "load";
    r.error = "fake: failed before the id exchange";
    return result(3);
  }
  ctl.line("stage id");
  if (a.rank == 0) {
    if (action == "noid") block_forever();
    unsigned char id[128];
    for (unsigned i = 0; i < sizeof id; ++i) id[i] = static_cast<unsigned char>(i * 7 + 1);
    ctl.line("id " + hex_encode(id, sizeof id));
  } else {
    std::string line;
    if (!read_line(a.id_fd, line, 4096) || !line.starts_with("id ") || line.size() != 3 + 256) {
      r.stage = "id";
      r.error = "no NCCL unique id from rank 0 (it failed or stopped before ncclGetUniqueId returned)";
      return result(3);
    }
  }
  ctl.line("stage cuda");
  ctl.line("stage init");
  std::string log = spec_value(spec, "log", "");
  if (!log.empty()) copy_file_to_stdout(log);
  if (int delay = std::stoi(spec_value(spec, "delay", "0")); delay > 0) ::usleep(static_cast<useconds_t>(delay) * 1000);
  if (action == "hang" || action == "noid") block_forever();
  if (action == "crash") {
    ::signal(SIGSEGV, SIG_DFL);
    ::raise(SIGSEGV);
  }
  if (action == "exit") return 0;
  if (action == "flood") {
    std::string chunk(64 * 1024, 'x');
    for (int i = 0; i < 32; ++i) write_all(STDOUT_FILENO, chunk);
  }
  if (action == "fail") {
    r.stage = "init";
    r.nccl_result = 2;
    r.error = "ncclCommInitRank: unhandled system error (run with NCCL_DEBUG=INFO for details) (2)";
    return result(3);
  }
  ctl.line("stage allreduce");
  ctl.line("stage verify");
  r.phases_ms = {{"load", 1.0}, {"cuda", 2.0}, {"init", 3.0}, {"allreduce", 0.5}};
  if (action == "mismatch") {
    r.stage = "verify";
    r.mismatches = a.count;
    r.first_bad_index = 0;
    r.first_bad_value = a.rank + 1;
    r.error = fmt::format("all-reduce result wrong in {} of {} elements (first at 0: {} instead of {})", a.count,
                          a.count, a.rank + 1, r.expected);
    return result(1);
  }
  ctl.line("stage destroy");
  ctl.line("stage done");
  r.stage = "done";
  r.ok = true;
  return result(0);
}

}  // namespace
}  // namespace mrcheck::detail

int main(int argc, char** argv) {
  std::vector<std::string> a(argv + 1, argv + argc);
  if (a.size() < 2 || a[0] != "--spec") {
    std::fprintf(stderr, "usage: %s --spec SPEC RANK-ARGS...\n", argv[0]);
    return 2;
  }
  std::string spec = a[1];
  a.erase(a.begin(), a.begin() + 2);
  auto r = mrcheck::parse_nccl_rank_args(a);
  if (!r.is_ok()) {
    std::fprintf(stderr, "fake rank: %s\n", r.error().message().c_str());
    return 2;
  }
  // As nccl_rank_main: the orchestrator may be gone; line-buffered stdout like NCCL's log.
  ::signal(SIGPIPE, SIG_IGN);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  return mrcheck::detail::fake_rank_main(*r, spec);
}
