// Loading and saving a node's stack history (history.h) in a state directory the caller has checked
// (prolog/node_action.h: state_store::open).
#pragma once

#include <mrcheck/history.h>
#include <mrcheck/status.h>

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

namespace mrcheck {

std::string history_file_name(std::string_view node);

struct history_load {
  std::optional<stack_history> history;  // nullopt: none yet, or not usable (then `error` says why)
  std::string error;                     // one line, "" when none
  bool restarted = false;                // a file was there but unusable: the history starts again
};
// A missing file is no history and no error. A corrupt, foreign-owned, another node's or a newer version's file:
// an error line and `restarted` (never a verdict).
history_load load_history(const std::string& dir, const std::string& node, uid_t owner);
// history-<node>.json, 0600, written atomically and fsync'd.
status save_history(const std::string& dir, const stack_history& h);

// The stack mrcheck-prolog last saw on `node`, for a report written later in the same boot: the report_dir= files
// of `mrcheck-prolog admin-collect` (the prolog fingerprinted the node at the job's start; the collector, which
// runs beside the job, reads nothing more than this file and the boot id). nullopt when there is no history, when
// it is unusable (`error` says why) or when it is of another boot than `boot_id` (the node rebooted and no
// prolog or health check has run since: its stack is not known).
struct last_stack {
  std::optional<stack_fingerprint> stack;
  std::string error;  // one line, "" when none
};
last_stack load_last_stack(const std::string& dir, const std::string& node, uid_t owner, std::string_view boot_id);

}  // namespace mrcheck
