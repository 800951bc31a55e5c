#include "admin/handoff_io.h"

#include <mrcheck/admin_record.h>
#include <mrcheck/units.h>

#include <fmt/format.h>

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace mrcheck::handoff_io {

int ms_until(clock::time_point t) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(t - clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1 << 30));
}

std::string hello(std::uint64_t job, std::uint64_t step) { return fmt::format("mrcheck-admin 2 {}.{}", job, step); }

munge_session admin_session(std::uint64_t job, std::uint64_t step, bool listener, const munge_settings& auth) {
  return munge_session({"admin-handoff", auth.cluster, job, step}, listener ? "listener" : "collector",
                       listener ? "collector" : "listener", {0, 0}, auth);
}

bool read_line(int fd, std::string& out, std::size_t max, clock::time_point until) {
  out.clear();
  char buf[512];
  for (;;) {
    struct pollfd p {
      fd, POLLIN, 0
    };
    int n = ::poll(&p, 1, ms_until(until));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    // Peek, then consume up to the newline only: a second line stays in the socket for the next call.
    ssize_t r = ::recv(fd, buf, sizeof buf, MSG_PEEK);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    auto* nl = static_cast<char*>(std::memchr(buf, '\n', static_cast<std::size_t>(r)));
    std::size_t take = nl ? static_cast<std::size_t>(nl - buf) + 1 : static_cast<std::size_t>(r);
    ssize_t got = ::recv(fd, buf, take, 0);
    if (got <= 0) return false;
    if (nl) {
      out.append(buf, static_cast<std::size_t>(got) - 1);
      return out.size() <= max;
    }
    out.append(buf, static_cast<std::size_t>(got));
    if (out.size() > max) return false;
  }
}

bool send_all(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t w = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    s.remove_prefix(static_cast<std::size_t>(w));
  }
  return true;
}

result<std::string> accept_sealed(int c, munge_session& s, const std::string& nonce, clock::time_point until,
                                  const std::string& from) {
  s.set_peer_nonce(nonce);
  auto cred = s.seal("hello");
  if (!cred) {
    send_all(c, "noauth\n");
    return status::error("admin handoff: " + cred.error().message());
  }
  std::string line;
  if (!send_all(c, "auth " + *cred + "\n") ||
      !read_line(c, line, k_node_record_max * 2 + 4096, std::min(until, clock::now() + std::chrono::seconds(3))) ||
      !line.starts_with("auth ")) {
    return status::error(fmt::format("admin handoff: no credential from {} in time", from));
  }
  auto body = s.open(std::string_view(line).substr(5));
  if (!body) {
    send_all(c, "refused\n");
    return status::error(fmt::format("admin handoff: refused peer {}: {}", from, body.error().message()));
  }
  return body;
}

send_outcome send_sealed(int fd, std::uint64_t job_id, std::uint64_t step_id, const std::string& record,
                         clock::time_point deadline, const munge_settings& auth, const std::string& source) {
  using k = send_outcome::kind;
  munge_session s = admin_session(job_id, step_id, false, auth);
  auto until = [&] { return std::min(deadline, clock::now() + std::chrono::seconds(3)); };
  std::string reply;
  if (!send_all(fd, hello(job_id, step_id) + " " + s.nonce() + "\n") || !read_line(fd, reply, 4096, until()))
    return {k::walk, ""};
  if (reply == "noauth") return {k::stop, "admin handoff: node 0 could not authenticate (munged)"};
  if (reply == "busy") return {k::walk, ""};  // another step's listener: the protocol's own answer
  // Anything else is no listener of mrcheck's: a squatter answering "ok" or its own words. Walk on, and name it.
  if (!reply.starts_with("auth ")) return {k::walk, "no credential, answered \"" + escape_line(reply, 64) + "\""};
  auto opened = s.open(std::string_view(reply).substr(5));
  if (!opened) {
    if (opened.error().message().starts_with("could not authenticate")) {
      return {k::stop, "admin handoff: " + opened.error().message()};
    }
    return {k::walk, opened.error().message()};
  }
  auto cred = s.seal(record);
  if (!cred) return {k::stop, "admin handoff: " + cred.error().message()};
  if (!send_all(fd, "auth " + *cred + "\n") || !read_line(fd, reply, 4096, until())) return {k::walk, ""};
  if (reply == "bad") return {k::stop, "admin handoff: node 0 refused the record as malformed"};
  if (reply == "refused") {
    return {k::stop, fmt::format("admin handoff: node 0 refused the record: not this node's credential or "
                                 "address ({})",
                                 escape_line(source, 64))};
  }
  if (!reply.starts_with("ok ")) return {k::walk, ""};
  auto ok = s.open(std::string_view(reply).substr(3));
  if (!ok || *ok != "ok") return {k::walk, ok ? "an unexpected answer" : ok.error().message()};
  return {k::delivered, ""};
}

}  // namespace mrcheck::handoff_io
