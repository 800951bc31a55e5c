// The prolog's stack history step (include/mrcheck/history.h): load the node's history from state_dir, compare
// this run's stack, print the change lines ("no history yet" on a first run), name the change in the drain reason
// of a check it broke, and save the history when anything in it moved. Never changes a verdict: an unusable
// history file is one line and a restarted history, an unwritable state_dir one line and no history.
#pragma once

#include "prolog/node_action.h"

#include <mrcheck/check.h>
#include <mrcheck/history.h>
#include <mrcheck/log.h>

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace mrcheck::prolog {

struct history_step {
  std::string dir;                       // "" = history off this run
  std::optional<stack_history> history;  // this run's view, nullopt when off
  std::optional<stack_change> change;    // what this run found changed
  std::string state = "off";             // "no history yet", "restarted", "unchanged", "changed", "off"
  bool dirty = false;                    // to be saved
};

// Loads, compares and records. `dir` is a state_dir state_store::open accepted.
history_step begin_history(const std::string& dir, const std::string& node, const stack_fingerprint& fp,
                           const report& rep, std::int64_t now, uid_t owner, log_sink& out, const char* mode_name);
// The drain reason names the latest change the draining check (drains_for) depends on.
void name_change_in_reason(desired_action& want, const report& rep, const history_step& h, bool drain_site);
// Saves when dirty; a failure is one error line.
void finish_history(history_step& h, log_sink& out, const char* mode_name);
// {"state", "changes": [{"key","before","after","line"}], "last_change": {...}, "revalidated": {...}}
nlohmann::json history_json(const history_step& h);

}  // namespace mrcheck::prolog
