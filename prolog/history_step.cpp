// mrcheck-prolog's history step (history_step.h).
#include "prolog/history_step.h"

#include <mrcheck/history_store.h>
#include <mrcheck/units.h>

#include <nlohmann/json.hpp>

namespace mrcheck::prolog {

history_step begin_history(const std::string& dir, const std::string& node, const stack_fingerprint& fp,
                           const report& rep, std::int64_t now, uid_t owner, log_sink& out, const char* mode_name) {
  history_step h;
  h.dir = dir;
  history_load loaded = load_history(dir, node, owner);
  if (!loaded.error.empty()) log(out, log_level::error, "{}: {}", mode_name, loaded.error);
  stack_history hist = loaded.history ? std::move(*loaded.history) : stack_history{};
  hist.node = node;
  const bool first = !hist.has_current;
  const auto old_verdicts = hist.verdicts;
  const std::string old_boot = hist.current.boot_id;
  h.change = record_run(hist, fp, rep, now);
  if (first) {
    h.state = loaded.restarted ? "restarted" : "no history yet";
    log(out, log_level::info, "{}: stack history: {} for {} (kept in {})", mode_name, h.state, node,
        escape_line(dir, 128));
  } else if (h.change) {
    h.state = "changed";
    for (const auto& i : h.change->items) {
      for (const auto& line : change_lines(*h.change, i)) out.write(log_level::info, line);
    }
  } else {
    h.state = "unchanged";
  }
  h.dirty = first || h.change || hist.verdicts != old_verdicts || hist.current.boot_id != old_boot;
  h.history = std::move(hist);
  return h;
}

void name_change_in_reason(desired_action& want, const report& rep, const history_step& h, bool drain_site) {
  if (want.what != desired_action::kind::drain || !h.history) return;
  for (const auto& c : rep.checks) {
    if (!drains_for(c, drain_site)) continue;
    const stack_change_item* item = nullptr;
    const stack_change* change = change_for_check(*h.history, c.id, &item);
    if (!change) return;
    check_result named = c;
    // The change in few words, so the cause the prolog printed (the check's summary) still fits the reason.
    named.summary = change_words_short(*change, *item) + ": " + c.summary;
    want.reason = drain_reason(named);
    return;
  }
}

void finish_history(history_step& h, log_sink& out, const char* mode_name) {
  if (!h.history || !h.dirty) return;
  if (auto s = save_history(h.dir, *h.history); !s) {
    log(out, log_level::error, "{}: stack history not kept: {}", mode_name, s.message());
  }
  h.dirty = false;
}

nlohmann::json history_json(const history_step& h) {
  nlohmann::json j = {{"state", h.state}};
  nlohmann::json changes = nlohmann::json::array();
  if (h.change) {
    for (const auto& i : h.change->items) {
      changes.push_back({{"key", i.key},
                         {"before", i.before},
                         {"after", i.after},
                         {"line", change_line(*h.change, i)},
                         {"defaults", change_defaults_json(i)}});
    }
  }
  j["changes"] = changes;
  if (h.history) {
    if (!h.history->changes.empty()) {
      const auto& c = h.history->changes.back();
      nlohmann::json items = nlohmann::json::array();
      for (const auto& i : c.items) {
        for (const auto& line : change_lines(c, i)) items.push_back(line);
      }
      j["last_change"] = {{"time", c.time}, {"new_boot", c.new_boot}, {"lines", items}};
    }
    j["since"] = h.history->since;
    if (!h.history->revalidated.empty()) {
      j["revalidated"] = {{"verdict", h.history->revalidated},
                          {"reason", h.history->revalidate_reason},
                          {"time", h.history->revalidated_time}};
    }
  }
  return j;
}

}  // namespace mrcheck::prolog
