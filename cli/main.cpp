// mrcheck: the command line. One file per subcommand (commands.h); this file only dispatches.
#include "commands.h"

#include <mrcheck/build_config.h>

#include <fmt/core.h>

#include <cstdio>
#include <exception>
#include <string_view>

namespace {

// The one source of the CLI's usage: the man page mrcheck(1) is generated from this text and each
// command's own --help (man/mangen.cpp), so keep the "commands:" section's shape: two spaces, the
// command's words, two or more spaces, a one-line summary. Options live in each command's --help only.
constexpr std::string_view k_usage =
    "usage: mrcheck <command> [options]\n"
    "       mrcheck <command> --help\n"
    "       mrcheck --version\n"
    "\n"
    "commands:\n"
    "  report      every fact mrcheck reads and a verdict per basic check\n"
    "  chain       RLIMIT_MEMLOCK of a process and each ancestor, marking where it dropped\n"
    "  dump        copy exactly the files mrcheck reads into a tree that --root replays\n"
    "  probe mr    register memory the way NCCL does, as this user, and explain the errno\n"
    "  probe nccl  a real 2-rank NCCL all-reduce through the network path\n"
    "  probe rdma  an RC queue pair on each active port: send/recv and RDMA write, bytes verified\n"
    "  explain     find NCCL failures in a log, give the cause and the fix\n"
    "  fleet       many nodes' stacks side by side: the majority and the nodes that differ\n"
    "\n"
    "options:\n"
    "  --version   the mrcheck version and the Slurm version it was built against\n"
    "  --help      this text; `mrcheck <command> --help` lists a command's options\n"
    "\n"
    "exit: 0 pass or warn, 1 a check failed (explain: an NCCL failure was found), 2 usage or I/O error\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace mrcheck::cli;
  try {
    if (argc < 2) {
      std::fputs(k_usage.data(), stderr);
      return k_exit_usage;
    }
    std::string_view cmd = argv[1];
    args rest(argv + 2, argv + argc);
    if (cmd == "--version" || cmd == "version") {
      fmt::print("mrcheck {} (built against Slurm {})\n", MRCHECK_VERSION,
                 std::string_view(MRCHECK_SLURM_VERSION).empty() ? "none" : MRCHECK_SLURM_VERSION);
      return k_exit_ok;
    }
    if (cmd == "--help" || cmd == "-h" || cmd == "help") {
      std::fputs(k_usage.data(), stdout);
      return k_exit_ok;
    }
    if (cmd == "report") return cmd_report(rest);
    if (cmd == "chain") return cmd_chain(rest);
    if (cmd == "dump") return cmd_dump(rest);
    if (cmd == "probe") return cmd_probe(rest);
    if (cmd == "explain") return cmd_explain(rest);
    if (cmd == "fleet") return cmd_fleet(rest);
    fmt::print(stderr, "mrcheck: unknown command '{}'\n{}", cmd.substr(0, 64), k_usage);
    return k_exit_usage;
  } catch (const std::exception& e) {
    fmt::print(stderr, "mrcheck: internal error: {}\n", e.what());
    return k_exit_usage;
  }
}
