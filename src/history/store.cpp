// The history file in state_dir: history-<node>.json, root's, 0600, replaced atomically (atomic_file.h).
#include <mrcheck/atomic_file.h>
#include <mrcheck/history.h>
#include <mrcheck/history_store.h>
#include <mrcheck/units.h>

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace mrcheck {

namespace {

constexpr std::size_t k_max_history_file = 1 << 20;

class dir_fd {
 public:
  explicit dir_fd(const std::string& dir) : fd_(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) {}
  ~dir_fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  dir_fd(const dir_fd&) = delete;
  dir_fd& operator=(const dir_fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

std::string history_file_name(std::string_view node) { return fmt::format("history-{}.json", node); }

history_load load_history(const std::string& dir, const std::string& node, uid_t owner) {
  history_load out;
  dir_fd d(dir);
  if (d.get() < 0) {
    out.error = status::from_errno(fmt::format("history: state_dir {}", escape_line(dir, 128)), errno).message();
    return out;
  }
  std::string name = history_file_name(node);
  auto text = read_file_at(d.get(), name, owner, k_max_history_file, fmt::format("history {}", escape_line(dir, 128)));
  if (!text) {
    if (text.error().err() != ENOENT) {
      out.error = text.error().message() + ": history restarted";
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
  dir_fd d(dir);
  if (d.get() < 0) return status::from_errno(fmt::format("history: state_dir {}", escape_line(dir, 128)), errno);
  return write_file_at(d.get(), history_file_name(h.node), history_to_text(h), 0600, true,
                       fmt::format("history {}", escape_line(dir, 128)));
}

}  // namespace mrcheck
