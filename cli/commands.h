// The CLI's subcommands, one file each (cmd_<name>.cpp). Each takes the arguments after its name and
// returns the process exit code: 0 pass/warn, 1 fail, 2 usage or I/O error (documented in the README).
#pragma once

#include <string>
#include <vector>

namespace mrcheck::cli {

using args = std::vector<std::string>;

int cmd_report(const args& a);  // mrcheck report [--json] [--root DIR]
int cmd_chain(const args& a);   // mrcheck chain [--pid PID] [--json] [--root DIR]
int cmd_dump(const args& a);    // mrcheck dump --out DIR
int cmd_probe(const args& a);   // mrcheck probe mr|nccl|rdma ... (dispatches to the three below)
int cmd_probe_mr(
    const args& a);  // mrcheck probe mr [--size BYTES] [--device NAME] [--verbs-library PATH] [--gpu] [--json]
int cmd_probe_rdma(const args& a);  // mrcheck probe rdma [--sizes LIST] [--device NAME] [--json]
int cmd_probe_nccl(const args& a);  // mrcheck probe nccl [--mode local-pair|gpu-pair|node-pair] [--json]
int cmd_explain(const args& a);     // mrcheck explain [FILE|-] [--root DIR] [--json]
int cmd_fleet(const args& a);       // mrcheck fleet [--json] [--rules FILE] PATH...

inline constexpr int k_exit_ok = 0;
inline constexpr int k_exit_fail = 1;
inline constexpr int k_exit_usage = 2;

}  // namespace mrcheck::cli
