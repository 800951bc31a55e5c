// The table of commands (command_table.h) and what comes from it: the usage, the dispatch, the option lists.
#include "command_table.h"

#include <mrcheck/build_config.h>

#include <fmt/core.h>

#include <algorithm>
#include <array>

namespace mrcheck::cli {

namespace {

// In the order `mrcheck --help` lists them. Summaries stay on one line (mrcheck(1) sets each as a heading's text).
constexpr std::array k_commands{
    command{"report", "every fact mrcheck reads and a verdict per basic check", cmd_report, declare_report},
    command{"chain", "RLIMIT_MEMLOCK of a process and each ancestor, marking where it dropped", cmd_chain,
            declare_chain},
    command{"dump", "copy exactly the files mrcheck reads into a tree that --root replays", cmd_dump, declare_dump},
    command{"probe mr", "register memory the way NCCL does, as this user, and explain the errno", cmd_probe_mr,
            declare_probe_mr},
    command{"probe nccl", "a real 2-rank NCCL all-reduce through the network path", cmd_probe_nccl, declare_probe_nccl},
    command{"probe rdma", "an RC queue pair on each active port: send/recv and RDMA write, bytes verified",
            cmd_probe_rdma, declare_probe_rdma},
    command{"explain", "find NCCL failures in a log, give the cause and the fix", cmd_explain, declare_explain},
    command{"fleet", "many nodes' stacks side by side: the majority and the nodes that differ", cmd_fleet,
            declare_fleet},
};

std::string_view first_word(std::string_view words) { return words.substr(0, words.find(' ')); }

// The second words of the commands that start with `group` ("mr, nccl or rdma").
std::string choices(std::string_view group) {
  std::vector<std::string_view> w;
  for (const auto& c : k_commands) {
    if (first_word(c.words) == group && c.words.size() > group.size()) w.push_back(c.words.substr(group.size() + 1));
  }
  std::string s;
  for (std::size_t i = 0; i < w.size(); ++i)
    s += fmt::format("{}{}", i == 0 ? "" : i + 1 == w.size() ? " or " : ", ", w[i]);
  return s;
}

int version() {
  fmt::print("mrcheck {} (built against Slurm {})\n", MRCHECK_VERSION,
             std::string_view(MRCHECK_SLURM_VERSION).empty() ? "none" : MRCHECK_SLURM_VERSION);
  return k_exit_ok;
}

}  // namespace

std::span<const command> commands() { return k_commands; }

std::string usage_text() {
  // The "commands:" section keeps man/mangen.cpp's shape: two spaces, the words, two or more spaces, the summary.
  std::size_t width = 0;
  for (const auto& c : k_commands) width = std::max(width, c.words.size());
  std::string list;
  for (const auto& c : k_commands) list += fmt::format("  {:<{}}  {}\n", c.words, width, c.summary);
  return "usage: mrcheck <command> [options]\n"
         "       mrcheck <command> --help\n"
         "       mrcheck --version\n"
         "\n"
         "commands:\n" +
         list +
         "\n"
         "options:\n"
         "  --version   the mrcheck version and the Slurm version it was built against\n"
         "  --help      this text; `mrcheck <command> --help` lists a command's options\n"
         "\n"
         "exit: 0 pass or warn, 1 a check failed (explain: an NCCL failure was found), 2 usage or I/O error\n";
}

int dispatch(const args& argv) {
  if (argv.empty()) {
    fmt::print(stderr, "{}", usage_text());
    return k_exit_usage;
  }
  const std::string& first = argv[0];
  if (first == "--version" || first == "version") return version();
  if (first == "--help" || first == "-h" || first == "help") {
    fmt::print("{}", usage_text());
    return k_exit_ok;
  }
  for (const auto& c : k_commands) {
    std::size_t n = c.words.find(' ') == std::string_view::npos ? 1 : 2;
    if (argv.size() < n || first != first_word(c.words)) continue;
    if (n == 2 && argv[1] != c.words.substr(first.size() + 1)) continue;
    return c.run(args(argv.begin() + static_cast<std::ptrdiff_t>(n), argv.end()));
  }
  std::string group = choices(first);
  if (!group.empty() && argv.size() == 1) {
    fmt::print(stderr, "mrcheck: {}: which {}? ({})\n", first, first, group);
  } else if (!group.empty()) {
    fmt::print(stderr, "mrcheck: {}: unknown {} '{}' ({})\n", first, first, argv[1].substr(0, 64), group);
  } else {
    fmt::print(stderr, "mrcheck: unknown command '{}'\n{}", first.substr(0, 64), usage_text());
  }
  return k_exit_usage;
}

std::vector<option_doc> options_of(const command& c) {
  command_line line{std::string(c.words)};
  c.declare(line);
  return line.docs();
}

}  // namespace mrcheck::cli
