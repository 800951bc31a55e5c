// The cause rows of memory and resource limits (src/explain/causes/cause_rows.h): the HCA's own object limits, ENOMEM
// (RLIMIT_MEMLOCK against what pinning ran out of), EPERM (no memlock at all, no CAP_IPC_LOCK) and file descriptors.
// The rules follow docs/facts/verbs-and-nccl.md §2 and docs/transports.md ("HCA resource limits").
#include "cause_rows.h"

#include <mrcheck/units.h>

#include <fmt/format.h>

#include <cerrno>

namespace mrcheck::cause_rows {

namespace {

std::string hca_summary(const case_ctx& c) {
  const std::string_view o = hca_object(c.f.call);
  return fmt::format(
      "{} failed{}: the HCA refused another {} object (its per-device limit, or on ConnectX the UAR space of the "
      "BAR); this pins no memory, so RLIMIT_MEMLOCK and max_map_count do not matter",
      c.call(), c.f.err ? fmt::format(" with {}", errno_name(c.f.err)) : std::string(),
      o.empty() ? std::string_view("firmware") : o);
}

bool limits_exceeded(const case_ctx& c) { return c.f.detail.find("limits exceeded") != std::string::npos; }
std::string memlock_fix(const case_ctx& c) { return c.memlock_fix(); }
std::string pinning_fix(const case_ctx& c) { return c.pinning_fix(); }
std::uint64_t soft(const case_ctx& c) { return *c.e.memlock_soft; }

std::string eperm_summary(const case_ctx& c) {
  const bool zero = c.e.memlock_soft && *c.e.memlock_soft == 0;
  const bool no_cap = c.e.cap_ipc_lock && !*c.e.cap_ipc_lock;
  std::string_view why =
      zero ? "RLIMIT_MEMLOCK soft limit is 0 and without CAP_IPC_LOCK the kernel refuses to pin any page"
      : no_cap && c.container()
          ? "the container has no CAP_IPC_LOCK and the kernel refuses to pin pages"
          : "the kernel refuses to pin pages when RLIMIT_MEMLOCK is 0 and the process has no CAP_IPC_LOCK";
  return fmt::format("{} got EPERM: {}", c.call(), why);
}

std::string eperm_fix(const case_ctx& c) {
  const bool zero = c.e.memlock_soft && *c.e.memlock_soft == 0;
  const bool no_cap = c.e.cap_ipc_lock && !*c.e.cap_ipc_lock;
  return c.container() || (no_cap && !zero)
             ? container_memlock_fix(c.e.runtime)
             : std::string("give the task a memlock limit above 0: ") + std::string(k_memlock_fix_slurm);
}

constexpr line_list k_hca{lines::call_errno, lines::device_list, lines::firmware};
constexpr line_list k_enomem{lines::call_errno, lines::limits, lines::resources, lines::cma, lines::efa_pages};

constexpr std::array k_rows{
    // The HCA's own limits come before every errno row: an ENOMEM from them pins nothing.
    cause_row{.when = [](const case_ctx& c) { return c.hca_limit() && hca_object(c.f.call) == "uar"; },
              .evidence = k_hca,
              .what = cause::hca_resources,
              .confirmed = limits_exceeded,
              .summary = hca_summary,
              .fix = "the UAR space ran out (many processes per HCA): raise PF_LOG_BAR_SIZE with mlxconfig and "
                     "reboot, or run fewer ranks per HCA (openucx/ucx #6049)",
              .fallback = k_tcp_fallback},
    cause_row{.when = [](const case_ctx& c) { return c.hca_limit(); },
              .evidence = k_hca,
              .what = cause::hca_resources,
              .confirmed = limits_exceeded,
              .summary = hca_summary,
              .fix = "compare `rdma resource show` (objects in use) with `ibv_devinfo -v` (max_qp, max_cq, max_mr, "
                     "max_pd) on that node; reduce the objects the job creates (fewer processes or connections per "
                     "HCA, UCX_TLS without rc for many peers, smaller FI_VERBS_TX_SIZE/RX_SIZE) or spread ranks over "
                     "more HCAs",
              .fallback = k_tcp_fallback},
    // ENOMEM. The efa driver's REG_MR admin command failed: the pages were pinned and charged already, the device
    // refused.
    cause_row{.err = ENOMEM,
              .names = "efa_reg_mr",
              .when = [](const case_ctx& c) { return c.f.transport == "kernel"; },
              .evidence = k_enomem,
              .what = cause::pinning_resources,
              .confirmed = [](const case_ctx& c) { return c.e.memlock_soft.has_value(); },
              .summary =
                  +[](const case_ctx& c) {
                    return fmt::format(
                        "the efa kernel driver's REG_MR command failed with ENOMEM on {}: the pages were "
                        "already pinned (memlock passed), the EFA device refused more registered pages",
                        c.f.provider.empty() ? "the device" : c.f.provider);
                  },
              .fix = k_efa_pages_fix,
              .fallback = k_net_plugin_fallback},
    cause_row{.err = ENOMEM,
              .when = [](const case_ctx& c) { return c.bypasses_memlock(); },
              .evidence = k_enomem,
              .what = cause::pinning_resources,
              .confirmed = yes,
              .summary =
                  +[](const case_ctx& c) {
                    return fmt::format(
                        "{} got ENOMEM with CAP_IPC_LOCK, which skips the memlock limit: the kernel could "
                        "not pin the pages ({})",
                        c.call(), c.pinning_what());
                  },
              .fix = pinning_fix,
              .fallback = k_tcp_fallback},
    cause_row{.err = ENOMEM,
              .when = [](const case_ctx& c) { return !c.e.memlock_soft && (c.container() || is_queue_call(c.f.call)); },
              .evidence = k_enomem,
              .what = cause::memlock,
              .summary =
                  +[](const case_ctx& c) {
                    return fmt::format(
                        "{} got ENOMEM{}: the queue/registration memory must be locked and "
                        "RLIMIT_MEMLOCK (or a missing CAP_IPC_LOCK) is the usual limit; the task's limit "
                        "is not known here",
                        c.call(), c.container() ? " in a container" : "");
                  },
              .fix = memlock_fix,
              .fallback = k_tcp_fallback},
    cause_row{.err = ENOMEM,
              .when = [](const case_ctx& c) { return !c.e.memlock_soft; },
              .evidence = k_enomem,
              .what = cause::memlock,
              .summary =
                  +[](const case_ctx& c) {
                    return fmt::format(
                        "{} got ENOMEM: pinned memory is charged to RLIMIT_MEMLOCK (soft), the usual "
                        "cause; the failed task's limit is not known here",
                        c.call());
                  },
              .fix = memlock_fix,
              .fallback = k_tcp_fallback},
    cause_row{.err = ENOMEM,
              .when = [](const case_ctx& c) { return soft(c) == k_unlimited; },
              .evidence = k_enomem,
              .what = cause::pinning_resources,
              .confirmed = yes,
              .summary =
                  +[](const case_ctx& c) {
                    return fmt::format(
                        "{} got ENOMEM although RLIMIT_MEMLOCK is unlimited: the kernel could not pin the "
                        "pages ({})",
                        c.call(), c.pinning_what());
                  },
              .fix = pinning_fix,
              .fallback = k_tcp_fallback},
    cause_row{.err = ENOMEM,
              .when = [](const case_ctx& c) { return c.f.size && *c.f.size > soft(c); },
              .evidence = k_enomem,
              .what = cause::memlock,
              .confirmed = yes,
              .summary =
                  +[](const case_ctx& c) {
                    return fmt::format("registration of {} needs locked memory but {} is {}", format_bytes(*c.f.size),
                                       c.whose_limit(), limit_text(soft(c)));
                  },
              .fix = memlock_fix,
              .fallback = k_tcp_fallback},
    // A limit at or above physical memory cannot be what stopped the pinning.
    cause_row{.err = ENOMEM,
              .when = [](const case_ctx& c) { return c.e.mem_total && soft(c) >= *c.e.mem_total; },
              .evidence = k_enomem,
              .what = cause::pinning_resources,
              .confirmed = yes,
              .summary =
                  +[](const case_ctx& c) {
                    return fmt::format(
                        "{} got ENOMEM with RLIMIT_MEMLOCK {} (not below MemTotal {}): the kernel could "
                        "not pin the pages",
                        c.call(), limit_text(soft(c)), format_bytes(*c.e.mem_total));
                  },
              .fix = pinning_fix,
              .fallback = k_tcp_fallback},
    // Finite and below RAM: every MR of the process counts against it (pinned_vm), so NCCL's many buffers add up
    // past it even when each one fits. NCCL's documentation asks for unlimited.
    cause_row{.err = ENOMEM,
              .evidence = k_enomem,
              .what = cause::memlock,
              .confirmed = yes,
              .summary =
                  +[](const case_ctx& c) {
                    return fmt::format(
                        "{} got ENOMEM and {} is {}: all of a process's registrations count against it, "
                        "and NCCL needs unlimited",
                        c.call(), c.whose_limit(), limit_text(soft(c)));
                  },
              .fix = memlock_fix,
              .fallback = k_tcp_fallback},
    cause_row{.err = EPERM,
              .evidence = {lines::call_errno, lines::limits},
              .what = cause::capability,
              .confirmed =
                  [](const case_ctx& c) {
                    return (c.e.memlock_soft && *c.e.memlock_soft == 0) || (c.e.cap_ipc_lock && !*c.e.cap_ipc_lock);
                  },
              .summary = eperm_summary,
              .fix = eperm_fix,
              .fallback = k_tcp_fallback},
    cause_row{.err = {EMFILE, ENFILE},
              .evidence = {lines::call_errno},
              .what = cause::open_files,
              .summary =
                  +[](const case_ctx& c) {
                    return fmt::format(
                        "{} failed with {}: the process (RLIMIT_NOFILE) or the system ran out of file "
                        "descriptors; each RDMA context, QP and socket takes some",
                        c.call(), errno_text(c.f.err));
                  },
              .fix = "raise the job's open-files limit (`ulimit -n`, Slurm PropagateResourceLimits NOFILE, "
                     "LimitNOFILE= of slurmd) and check `mrcheck report` for the NOFILE of the task"},
};

}  // namespace

std::span<const cause_row> memory_rows() { return k_rows; }

}  // namespace mrcheck::cause_rows
