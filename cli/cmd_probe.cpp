#include "commands.h"

#include <fmt/core.h>

namespace mrcheck::cli {

int cmd_probe(const args& a) {
  if (a.empty()) {
    fmt::print(stderr, "mrcheck: probe: which probe? (mr, nccl or rdma)\n");
    return k_exit_usage;
  }
  args rest(a.begin() + 1, a.end());
  if (a[0] == "mr") return cmd_probe_mr(rest);
  if (a[0] == "nccl") return cmd_probe_nccl(rest);
  if (a[0] == "rdma") return cmd_probe_rdma(rest);
  fmt::print(stderr, "mrcheck: probe: unknown probe '{}' (mr, nccl or rdma)\n", a[0].substr(0, 64));
  return k_exit_usage;
}

}  // namespace mrcheck::cli
