// mrcheck explain [FILE|-] [--root DIR] [--json]: every NCCL failure in a log, with its cause and fix.
//
// The work is one call, explain_log() (include/mrcheck/explain.h, src/explain/explain_log.cpp); this file parses the
// options and prints. It reads FILE (or stdin for "-" or no FILE when stdin is not a terminal) line by line in
// bounded memory, groups repeated failures, and diagnoses each group with the shared diagnosis (src/explain/causes)
// using this node's facts, or those of a `mrcheck dump` tree given with --root. For each finding it prints, in this order: the call and
// errno, why (limits first, then versions, then max_map_count/hugepages), the fix, and the TCP fallback
// (NCCL_IB_DISABLE=1) last with its cost.
//
// Exit: 0 no failure found, 1 at least one finding, 2 usage or I/O error. A failure is what the program itself called
// fatal (docs/transports.md, "What the program calls fatal"). Container notes (a kernel ABI warning, no libibverbs,
// the silent socket fallback) and the path note (GPUDirect RDMA off, or sockets where the node facts show it could do
// better, or NCCL's "No device found" in a job that did not ask for InfiniBand) are printed but are not findings: a
// log without a failure exits 0.
//
// JSON (--json), stable; new keys may be added, none renamed or removed:
//   {
//     "schema_version": 1,                  // include/mrcheck/verdict_schema.h; docs/schema/explain.schema.json
//     "source": "job.log",                  // the FILE argument, "-" for stdin
//     "lines_read": 12345,
//     "truncated_lines": 0,                 // lines longer than 64 KiB (only their first 64 KiB were read)
//     "dropped_failures": 0,                // failures beyond 256 distinct groups (counted, not shown)
//     "evidence_from": {"host": "gpu01", "root": false},   // root: true when read from --root DIR
//     "findings": [                         // in order of first appearance in the log
//       {
//         "cause": "memlock",               // memlock | capability | pinning_resources | rdma_stack_mismatch |
//                                           // gpu_peer_memory | dmabuf_unsupported | duplicate_gpu |
//                                           // no_rdma_device | unknown | hca_resources | gpu_out_of_memory |
//                                           // imex_channel | socket_interface | stack_limit | open_files |
//                                           // gpu_peer_limit | data_plane
//         "confirmed": true,                // node evidence backs the cause (false: inferred from errno alone)
//         "kind": "call",                   // call | completion_error | duplicate_gpu | no_device | system_error |
//                                           // fatal_warning (a WARN outside the taxonomy that NCCL failed on) |
//                                           // own_verdict (mrcheck's own FAIL line: `call` is its check id)
//         "transport": "ib",                // ib (NET/IB or another verbs user) | ofi (aws-ofi-nccl) | libfabric |
//                                           // kernel (an RDMA driver's dmesg line) | ucx
//         "provider": null,                 // libfabric provider or kernel device ("efa", "efa_0") when printed
//         "detail": null,                   // fatal_warning: the library's own error text ("out of memory")
//         "call": "ibv_reg_mr_iova2",       // null when the log names no call
//         "errno": 12,                      // null when the log prints none
//         "errno_name": "ENOMEM",           // null when unknown
//         "wc_status": null,                // ibv_wc_status of a completion error, else null
//         "count": 16,                      // lines with this failure
//         "lines": [120, 133],              // 1-based line numbers, the first 32
//         "ranks": [0, 1, 2],               // from srun -l / [rankN] / OpenMPI prefixes or NCCL's "rank N nranks"
//         "ranks_truncated": false,
//         "hosts": ["gpu01"],               // from NCCL's host:pid:tid or pdsh prefixes
//         "processes": 16,                  // distinct host:pid seen
//         "consequences": 1,                // follow-up lines ("unhandled system error", ...) tied to it
//         "example": "Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory",
//         "summary": "registration of 4 MiB needs locked memory but ...",
//         "evidence": ["ibv_reg_mr_iova2 failed with ENOMEM 12 (Cannot allocate memory)", "RLIMIT_MEMLOCK ..."],
//         "evidence_applies": true,         // false: node facts not used (another host, or a log naming none)
//         "fix": "set PropagateResourceLimitsExcept=MEMLOCK ...",
//         "fallback": "last resort: NCCL_IB_DISABLE=1 ..."   // null when there is none
//       }
//     ],
//     "path": {                             // null, or the path NCCL took when it silently fell back and the
//       "what": "gdr_off",                  //   node facts show better: gdr_off | sockets (src/explain/path_note.cpp)
//       "text": "NCCL used InfiniBand without GPUDirect RDMA: ...", "fix": "...", "evidence_applies": true
//     },
//     "container": {                        // container evidence in the log (docs/containers.md)
//       "runtime": "pyxis/enroot",          // null when the log names none
//       "notes": [{"what": "kernel_abi", "line": 12, "text": "..."}]  // runtime | kernel_abi | provider_load |
//     }                                     //   no_libibverbs | socket_fallback (line null: whole log)
//   }
#include "command_line.h"

#include <mrcheck/explain.h>
#include <mrcheck/sysroot.h>
#include <mrcheck/units.h>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>

namespace mrcheck::cli {

namespace {

struct explain_command_line {
  bool json = false;
  std::string root_dir;
  std::vector<std::string> files;
};

// Closes the fd it owns; stdin is borrowed.
struct input_fd {
  int fd = -1;
  bool owned = false;
  ~input_fd() {
    if (owned && fd >= 0) ::close(fd);
  }
};

}  // namespace

void declare_explain(command_line& c) {
  auto& o = c.make_options<explain_command_line>();
  c.positional("FILE", o.files, "FILE|-", "a job or NCCL log (stdin when '-' or omitted)", false);
  c.option("--root", o.root_dir, "DIR", "judge with the facts of a `mrcheck dump` tree instead of this node");
  c.flag("--json", o.json, "machine-readable findings");
  c.footer("exit: 0 no failure found, 1 failures found, 2 usage or I/O error\n");
}

int cmd_explain(const args& a) {
  command_line line("explain");
  declare_explain(line);
  if (auto code = line.parse(a)) return *code;
  const auto& opt = line.options<explain_command_line>();
  const bool json = opt.json;
  const std::string& root_dir = opt.root_dir;
  if (opt.files.size() > 1)
    return line.usage_error(fmt::format("unexpected argument '{}'", escape_line(opt.files[1], 64)));
  std::string file = opt.files.empty() ? std::string() : opt.files.front();
  if (opt.files.empty()) {
    if (::isatty(STDIN_FILENO)) return line.usage_error("no log given and stdin is a terminal");
    file.assign(1, '-');  // not `file = "-"`: g++ 12 -O2 -Wrestrict false positive (GCC PR 105329)
  }

  sysroot root;
  if (!root_dir.empty()) {
    auto r = sysroot::open(root_dir);
    if (!r) {
      fmt::print(stderr, "mrcheck: explain: --root: {}\n", r.error().message());
      return k_exit_usage;
    }
    root = *r;
  }

  input_fd in;
  if (file == "-") {
    in.fd = STDIN_FILENO;
  } else {
    in.fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (in.fd < 0) {
      fmt::print(stderr, "mrcheck: explain: open {}: {}\n", escape_line(file, 200), std::strerror(errno));
      return k_exit_usage;
    }
    in.owned = true;
  }

  explain_options opts;
  opts.source = file;
  explain_report report;
  if (status s = explain_log(in.fd, root, opts, report); !s) {
    fmt::print(stderr, "mrcheck: explain: {}: {}\n", escape_line(file, 200), s.message());
    return k_exit_usage;
  }
  if (json) {
    fmt::print("{}\n", explain_json(report).dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    fmt::print("{}", explain_text(report));
  }
  return report.findings.empty() ? k_exit_ok : k_exit_fail;
}

}  // namespace mrcheck::cli
