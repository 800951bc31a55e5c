// mrcheck: the command line. One file per subcommand (commands.h); this file only dispatches.
#include "commands.h"

#include <mrcheck/build_config.h>

#include <fmt/core.h>

#include <cstdio>
#include <exception>
#include <string_view>

namespace {

constexpr std::string_view k_usage =
    "usage: mrcheck <command> [options]\n"
    "\n"
    "commands:\n"
    "  report   [--json] [--root DIR]             every fact mrcheck reads and a verdict per basic check\n"
    "  chain    [--pid PID] [--json] [--root DIR] RLIMIT_MEMLOCK of PID and each ancestor, marking where it dropped\n"
    "  dump     --out DIR                         copy exactly the files mrcheck reads, for --root replay\n"
    "  probe mr [--size BYTES] [--device NAME] [--verbs-library PATH] [--gpu] [--json]\n"
    "                                             register memory the way NCCL does and explain the errno\n"
    "  probe nccl [--mode local-pair|gpu-pair|node-pair] [--json]\n"
    "                                             a real 2-rank NCCL all-reduce through the network path\n"
    "  explain  [FILE|-] [--root DIR] [--json]    find NCCL failures in a log, give the cause and the fix\n"
    "\n"
    "  --version, --help\n"
    "\n"
    "exit: 0 pass or warn, 1 a check failed, 2 usage or I/O error\n";

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
    fmt::print(stderr, "mrcheck: unknown command '{}'\n{}", cmd.substr(0, 64), k_usage);
    return k_exit_usage;
  } catch (const std::exception& e) {
    fmt::print(stderr, "mrcheck: internal error: {}\n", e.what());
    return k_exit_usage;
  }
}
