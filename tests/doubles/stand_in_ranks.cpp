#include "stand_in_ranks.h"

#include <fmt/format.h>

#include <algorithm>

namespace mrcheck {

child_spawner stand_in_spawner(const stand_in_ranks& ranks) {
  return [ranks](const child_spec& spec) -> result<std::unique_ptr<child_handle>> {
    const auto& argv = spec.argv;
    if (argv.size() < 3 || argv[1] != "probe" || argv[2] != "nccl") {
      return status::error(fmt::format("stand-in ranks: not a rank's command line ({} words)", argv.size()));
    }
    auto at = std::find(argv.begin() + 3, argv.end(), "--rank");
    if (at == argv.end() || at + 1 == argv.end() || (at[1] != "0" && at[1] != "1")) {
      return status::error("stand-in ranks: the command line has no --rank 0 or 1");
    }
    child_spec stand_in = spec;
    stand_in.argv = {ranks.program, "--spec", ranks.spec[at[1] == "0" ? 0 : 1]};
    stand_in.argv.insert(stand_in.argv.end(), argv.begin() + 3, argv.end());
    return spawn_child_process(stand_in);
  };
}

}  // namespace mrcheck
