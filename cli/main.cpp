// mrcheck: the command line. One file per subcommand, one table of them (command_table.h); this file only
// hands the arguments to the table's dispatcher.
#include "command_table.h"

#include <fmt/core.h>

#include <exception>

int main(int argc, char** argv) {
  using namespace mrcheck::cli;
  try {
    return dispatch(args(argv + 1, argv + argc));
  } catch (const std::exception& e) {
    fmt::print(stderr, "mrcheck: internal error: {}\n", e.what());
    return k_exit_usage;
  }
}
