// Placeholder until this subcommand lands; it says so and fails, never pretends to work.
#include "commands.h"

#include <fmt/core.h>

namespace mrcheck::cli {

int cmd_chain(const args&) {
  fmt::print(stderr, "mrcheck: chain: not built yet\n");
  return k_exit_usage;
}

}  // namespace mrcheck::cli
