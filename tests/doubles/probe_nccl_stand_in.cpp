// `mrcheck probe nccl` with the pair's ranks run as a scripted program (tests/unit/fake_nccl_rank.cpp), for the
// orchestration tests without a GPU (tests/unit/nccl_probe_pair_test.cpp, tests/e2e/admin_netns_test.sh), started
// through the pair's one test seam (tests/doubles/stand_in_ranks.h, cli/cmd_probe_nccl.h). Never installed: the
// shipped CLI has no option for it. Usage, `mrcheck probe nccl`'s own options plus three:
//
//   mrcheck_probe_nccl_stand_in [probe nccl] --stand-in PROGRAM --spec0 SPEC --spec1 SPEC [OPTIONS of probe nccl]
//
// (the leading `probe nccl` may be given, so that a script swaps only the program it runs).
#include "cmd_probe_nccl.h"
#include "doubles/stand_in_ranks.h"

#include <fmt/core.h>

#include <algorithm>
#include <string_view>

int main(int argc, char** argv) {
  using namespace mrcheck;
  cli::args a;
  stand_in_ranks stand_in;
  int i = 1;
  if (argc > 2 && std::string_view(argv[1]) == "probe" && std::string_view(argv[2]) == "nccl") i = 3;
  for (; i < argc; ++i) {
    std::string_view k = argv[i];
    if (k == "--stand-in" || k == "--spec0" || k == "--spec1") {
      if (i + 1 >= argc) {
        fmt::print(stderr, "mrcheck_probe_nccl_stand_in: {} needs a value\n", k);
        return cli::k_exit_usage;
      }
      (k == "--stand-in" ? stand_in.program : stand_in.spec[k == "--spec0" ? 0 : 1]) = argv[++i];
      continue;
    }
    a.emplace_back(k);
  }
  // The stand-ins need no GPU: local-pair unless the test asks for another mode (the shipped CLI picks the mode
  // from the GPUs it sees).
  if (!stand_in.program.empty() && std::find(a.begin(), a.end(), "--mode") == a.end()) {
    a.insert(a.end(), {"--mode", "local-pair"});
  }
  return cli::probe_nccl_with_spawner(a, stand_in.program.empty() ? child_spawner{} : stand_in_spawner(stand_in));
}
