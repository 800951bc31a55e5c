// What mrcheck-prolog does to its node after judging the matrix: drain it with a reason an admin can act on,
// resume it when mrcheck itself drained it and the matrix is right again, never touch a reason someone else set.
// slurmctld may be down: every call is retried with backoff inside a time budget, and an action that did
// not land is kept in the state directory and replaced by the next run's verdict. Slurm itself sits behind
// `node_control` (libslurm in prolog/, a fake in the tests).
#pragma once

#include <mrcheck/check.h>
#include <mrcheck/config.h>
#include <mrcheck/status.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace mrcheck {

// Every reason mrcheck sets starts with this; it is how a later run knows the drain is its own.
inline constexpr std::string_view k_reason_prefix = "mrcheck:";
// What slurmctld writes when a Prolog exits non-zero (docs/facts/slurm-prolog.md §1); see apply_action().
inline constexpr std::string_view k_prolog_error_reason = "Prolog error";
// Slurm stores any length, but sinfo -R / scontrol show node must stay one readable line.
inline constexpr std::size_t k_max_reason = 200;

// "mrcheck: <check> [<device>] (<owner>): <summary>" (docs/drain-reasons.md) escaped (no control bytes, no non-ASCII) and cut to k_max_reason.
std::string drain_reason(const check_result& c);
bool is_mrcheck_reason(std::string_view reason);

struct desired_action {
  enum class kind { none, drain, resume };
  kind what = kind::none;
  std::string reason;  // drain only
  bool operator==(const desired_action&) const = default;
};
std::string_view to_string(desired_action::kind k);

// fail -> drain with the first failing check's reason. error -> drain only with on_error=fail (reason says
// "checker error"), otherwise nothing: a broken checker proves neither a bad nor a good node. Everything
// else (pass, warn, skip) -> resume, which apply_action() narrows to "only if mrcheck drained it".
// Only a fail the node's to fix drains (owner_of(), include/mrcheck/owner.h), and one the site's to fix when
// `drain_site`; a job's fail goes to the user and the record, never to a drain.
bool drains_for(const check_result& c, bool drain_site);
desired_action plan_action(const report& r, fail_policy on_error, bool drain_site = false);

// A node as slurmctld sees it.
struct node_status {
  bool drain = false;  // DRAIN flag set (draining or drained)
  bool down = false;
  std::string reason;  // "" when none
};

// The three calls to slurmctld. Each returns within `timeout` (the implementation enforces it). A status
// with err() == EAGAIN means "slurmctld unreachable, try again"; any other error is final (access denied,
// unknown node).
class node_control {
 public:
  virtual ~node_control() = default;
  virtual result<node_status> query(const std::string& node, std::chrono::milliseconds timeout) = 0;
  virtual status drain(const std::string& node, const std::string& reason, std::chrono::milliseconds timeout) = 0;
  virtual status resume(const std::string& node, std::chrono::milliseconds timeout) = 0;
};

// Time for the retry loop, replaceable in tests.
struct retry_clock {
  std::function<std::chrono::steady_clock::time_point()> now = [] { return std::chrono::steady_clock::now(); };
  std::function<void(std::chrono::milliseconds)> sleep;  // default: std::this_thread::sleep_for
};

struct apply_outcome {
  enum class kind {
    nothing,      // nothing to do (pass and not drained by mrcheck)
    drained,      // drain sent
    already,      // already drained by mrcheck with this reason
    resumed,      // resume sent
    left_alone,   // drained/down with someone else's reason: not touched
    unreachable,  // slurmctld did not answer within the budget: keep it pending
    failed,       // slurmctld refused (access denied, unknown node)
  };
  kind what = kind::nothing;
  std::string message;  // one line, for the log
};
std::string_view to_string(apply_outcome::kind k);

// Queries the node once, then drains or resumes it at most once, each call retried with backoff
// (250 ms doubling, at most 2 s between tries, each try at most 4 s) until `budget` is spent.
// `pending_drain` = a drain of an earlier run did not land; if the node now carries Slurm's own
// "Prolog error" reason it was that run's non-zero exit, so mrcheck may replace it with its own reason.
apply_outcome apply_action(node_control& ctl, const std::string& node, const desired_action& want, bool pending_drain,
                           std::chrono::milliseconds budget, const retry_clock& clock = {});

// The state directory: root-owned, mode 0700, never a symlink, never writable by anyone but its owner.
class state_store {
 public:
  // Creates DIR (0700) when missing, then refuses it unless lstat says: a directory, not a symlink, owned by
  // `owner` (geteuid() in production), no group/other write bit.
  static result<state_store> open(const std::string& dir, uid_t owner);
  // The pending action for NODE, nullopt when none. A malformed or foreign-owned file is an error.
  result<std::optional<desired_action>> load(const std::string& node) const;
  // Written atomically (temp file O_EXCL|O_NOFOLLOW 0600, fsync, rename).
  status save(const std::string& node, const desired_action& a) const;
  status clear(const std::string& node) const;
  const std::string& dir() const { return dir_; }

 private:
  explicit state_store(std::string dir, uid_t owner) : dir_(std::move(dir)), owner_(owner) {}
  std::string dir_;
  uid_t owner_ = 0;
};

// Node names as Slurm allows them in a file name: [A-Za-z0-9._-], 1..64 bytes, not starting with '.'.
bool valid_node_name(std::string_view name);

}  // namespace mrcheck
