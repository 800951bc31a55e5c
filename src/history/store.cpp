// The history file in state_dir: history-<node>.json, root's, 0600, replaced atomically (private_dir.h).
#include <mrcheck/history.h>
#include <mrcheck/history_store.h>
#include <mrcheck/private_dir.h>
#include <mrcheck/units.h>

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace mrcheck {

namespace {

constexpr std::size_t k_max_history_file = 1 << 20;

// state_dir opened once, its last component never followed; the file is read and written relative to it.
dir_handle open_state_dir(const std::string& dir) {
  return dir_handle(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

}  // namespace

std::string history_file_name(std::string_view node) { return fmt::format("history-{}.json", node); }

history_load load_history(const std::string& dir, const std::string& node, uid_t owner) {
  history_load out;
  dir_handle d = open_state_dir(dir);
  if (d.fd() < 0) {
    out.error = status::from_errno(fmt::format("history: state_dir {}", escape_line(dir, 128)), errno).message();
    return out;
  }
  std::string name = history_file_name(node);
  auto text = read_file_at(d, name, owner, k_max_history_file);
  if (!text) {
    if (text.error().err() != ENOENT) {
      out.error = fmt::format("history {}: {}: history restarted", escape_line(dir, 128), text.error().message());
      out.restarted = true;
    }
    return out;
  }
  auto h = parse_history(*text, node);
  if (!h) {
    out.error = fmt::format("history {}/{}: {}: history restarted", escape_line(dir, 128), name, h.error().message());
    out.restarted = true;
    return out;
  }
  out.history = std::move(*h);
  return out;
}

status save_history(const std::string& dir, const stack_history& h) {
  dir_handle d = open_state_dir(dir);
  if (d.fd() < 0) return status::from_errno(fmt::format("history: state_dir {}", escape_line(dir, 128)), errno);
  if (auto w = write_file_at(d, history_file_name(h.node), history_to_text(h), 0600, true); !w) {
    return status::error(fmt::format("history {}: {}", escape_line(dir, 128), w.message()));
  }
  return status::ok();
}

last_stack load_last_stack(const std::string& dir, const std::string& node, uid_t owner, std::string_view boot_id) {
  last_stack out;
  history_load h = load_history(dir, node, owner);
  out.error = std::move(h.error);
  if (!h.history || !h.history->has_current) return out;
  const std::string& seen = h.history->current.boot_id;
  if (!seen.empty() && !boot_id.empty() && seen != boot_id) return out;
  out.stack = std::move(h.history->current);
  return out;
}

}  // namespace mrcheck
