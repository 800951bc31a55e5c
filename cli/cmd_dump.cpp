// Placeholder until this subcommand lands; it says so and fails, never pretends to work.
#include "commands.h"

#include <fmt/core.h>

namespace mrcheck::cli {

int cmd_dump(const args&) {
  fmt::print(stderr, "mrcheck: dump: not built yet\n");
  return k_exit_usage;
}

}  // namespace mrcheck::cli
