#include "nccl/rendezvous.h"
#include "sys/tcp_listen.h"

#include <mrcheck/units.h>

#include <mrcheck/nccl_probe.h>

#include <fmt/format.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace mrcheck::detail {

namespace {

using clock = std::chrono::steady_clock;

int ms_until(clock::time_point t, int cap_ms) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(t - clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, cap_ms));
}

// One line from a socket within `timeout_ms`; false on timeout, EOF, error or a line over `max` bytes.
bool read_line_timed(int fd, std::string& out, int timeout_ms, std::size_t max) {
  out.clear();
  auto until = clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    struct pollfd p {
      fd, POLLIN, 0
    };
    int n = ::poll(&p, 1, ms_until(until, timeout_ms));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    char c;
    ssize_t r = ::recv(fd, &c, 1, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    if (c == '\n') return true;
    if (out.size() >= max) return false;
    out.push_back(c);
  }
}

bool send_line(int fd, const std::string& line) {
  std::string s = line + "\n";
  const char* p = s.data();
  std::size_t n = s.size();
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

// Non-blocking connect bounded by `timeout_ms`; returns the connected (blocking) fd or -1.
int connect_timed(const struct addrinfo* ai, int timeout_ms) {
  int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
  if (fd < 0) return -1;
  int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
  if (rc != 0 && errno == EINPROGRESS) {
    struct pollfd p {
      fd, POLLOUT, 0
    };
    if (::poll(&p, 1, timeout_ms) == 1) {
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
    } else {
      rc = -1;
    }
  }
  if (rc != 0) {
    ::close(fd);
    return -1;
  }
  int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

}  // namespace

std::string rendezvous_hello(std::uint64_t job_id, std::uint64_t step_id) {
  return fmt::format("mrcheck-nccl 2 {}.{}", job_id, step_id);
}

munge_session nccl_pair_session(std::uint64_t job_id, std::uint64_t step_id, bool server, const munge_settings& auth) {
  return pair_session(nccl_pair_channel(job_id, step_id), server, auth);
}

munge_session pair_session(const pair_channel& ch, bool server, const munge_settings& auth) {
  return munge_session({ch.purpose, auth.cluster, ch.job_id, ch.step_id}, server ? "serve" : "join",
                       server ? "join" : "serve", {::getuid(), ::getgid()}, auth);
}

status send_sealed_line(rendezvous& rv, std::string_view body) {
  if (!rv.auth) return status::error("no session");
  auto cred = rv.auth->seal(body);
  if (!cred) return status::error(cred.error().message());
  if (!send_line(rv.fd, "m " + *cred)) return status::error(fmt::format("send: {}", std::strerror(errno)));
  return status::ok();
}

result<std::string> read_sealed_line(rendezvous& rv, clock::time_point until) {
  if (!rv.auth) return status::error("no session");
  std::string line;
  const int wait = ms_until(until, 1 << 30);
  if (!read_line_timed(rv.fd, line, std::max(wait, 1), 65536)) {
    return status::error(wait == 0 ? "no answer in time" : "no answer in time, or the connection closed");
  }
  if (!line.starts_with("m "))
    return status::error(fmt::format("a line that is no credential ('{}')", escape_line(line, 32)));
  return rv.auth->open(std::string_view(line).substr(2));
}

pair_channel nccl_pair_channel(std::uint64_t job_id, std::uint64_t step_id, int port_attempts) {
  return pair_channel{"nccl rendezvous", rendezvous_hello(job_id, step_id), "nccl-pair", job_id, step_id, 0,
                      port_attempts};
}

namespace {

std::string peer_text(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  char host[NI_MAXHOST] = "?";
  char serv[NI_MAXSERV] = "?";
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
    ::getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof host, serv, sizeof serv,
                  NI_NUMERICHOST | NI_NUMERICSERV);
  }
  std::string_view h = host;
  if (h.starts_with("::ffff:") && h.find('.') != std::string_view::npos) h.remove_prefix(7);  // IPv4-mapped
  return fmt::format("{} port {}", h, serv);
}

// Before any port: munged must answer, or the probe says at once that it cannot authenticate (no trust
// without it). The credential made for the test names no peer nonce: nobody accepts it.
status munged_reachable(const pair_channel& ch, const munge_settings& auth) {
  munge_session probe = pair_session(ch, true, auth);
  if (auto c = probe.seal("reachable"); !c) return status::error(ch.name + ": " + c.error().message());
  return status::ok();
}

int attempts_of(const pair_channel& ch) { return ch.port_attempts > 0 ? ch.port_attempts : k_nccl_port_attempts; }

std::uint16_t port_of(const pair_channel& ch, int attempt) {
  return nccl_pair_port(ch.job_id, ch.step_id ^ ch.port_salt, attempt);
}

bool is_nonce(std::string_view n) {
  return n.size() == 32 && n.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

// Server side of one accepted connection. "": the job's peer (answered "ok"); "busy": another step's probe;
// anything else: why it was refused. `fatal` when munged itself is unreachable.
std::string serve_one(int c, const std::string& want, munge_session& s, clock::time_point deadline, bool& fatal) {
  std::string hello;
  if (!read_line_timed(c, hello, std::min(2000, std::max(ms_until(deadline, 2000), 1)), 256) ||
      !hello.starts_with(want + " ")) {
    return "busy";
  }
  std::string nonce = hello.substr(want.size() + 1);
  if (!is_nonce(nonce)) return "a hello without a nonce";
  s.set_peer_nonce(nonce);
  auto cred = s.seal("hello");
  if (!cred) {
    fatal = true;
    send_line(c, "noauth");
    return cred.error().message();
  }
  std::string line;
  if (!send_line(c, "auth " + *cred) || !read_line_timed(c, line, std::max(1, ms_until(deadline, 3000)), 4096))
    return "no credential in time";
  if (line == "refused") return "it refused this node's credential";
  if (!line.starts_with("auth ")) return "no credential";
  auto body = s.open(line.substr(5));
  if (!body) {
    fatal = body.error().message().starts_with("could not authenticate");
    return body.error().message();
  }
  if (*body != "hello") return "an unexpected first message";
  send_line(c, "ok");
  return "";
}

}  // namespace

result<rendezvous> rendezvous_serve(std::uint64_t job_id, std::uint64_t step_id, clock::time_point deadline,
                                    const munge_settings& auth, std::vector<std::string>& refused, int port_attempts) {
  return rendezvous_serve(nccl_pair_channel(job_id, step_id, port_attempts), deadline, auth, refused);
}

result<rendezvous> rendezvous_serve(const pair_channel& ch, clock::time_point deadline, const munge_settings& auth,
                                    std::vector<std::string>& refused) {
  const int port_attempts = attempts_of(ch);
  if (auto st = munged_reachable(ch, auth); !st) return st;
  int listener = -1;
  rendezvous rv;
  std::string tried;
  for (int k = 0; k < port_attempts && listener < 0; ++k) {
    std::uint16_t port = port_of(ch, k);
    int err = 0;
    int fd = tcp_listen_any(port, 8, &err);
    if (fd < 0) {
      tried += fmt::format("{}{} ({})", tried.empty() ? "" : ", ", port, std::strerror(err));
      continue;
    }
    listener = fd;
    rv.port = port;
    rv.attempt = k;
  }
  if (listener < 0) return status::error(ch.name + ": no free port of the job's sequence: " + tried);

  const std::string& want = ch.hello;
  for (;;) {
    int wait = ms_until(deadline, 1 << 30);
    if (wait == 0) {
      ::close(listener);
      return status::error(fmt::format("{}: no peer of this job step reached port {} in time", ch.name, rv.port));
    }
    struct pollfd p {
      listener, POLLIN, 0
    };
    int n = ::poll(&p, 1, wait);
    if (n < 0 && errno != EINTR) {
      int e = errno;
      ::close(listener);
      return status::from_errno(ch.name + ": poll", e);
    }
    if (n <= 0) continue;
    int c = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    munge_session s = pair_session(ch, true, auth);
    bool fatal = false;
    std::string why = serve_one(c, want, s, deadline, fatal);
    if (why.empty()) {
      ::close(listener);
      rv.fd = c;
      rv.auth.emplace(std::move(s));
      return rv;
    }
    if (why == "busy") {
      send_line(c, "busy");  // another job's probe that derived the same port: it walks on
    } else {
      refused.push_back(fmt::format("{}: refused peer {}: {}", ch.name, peer_text(c), why));
      send_line(c, "refused");
    }
    ::close(c);
    if (fatal) {
      ::close(listener);
      return status::error(ch.name + ": " + why);
    }
  }
}

namespace {

// Joining side of one connected socket: "" when the server is the job's; "busy" for another step's; else why
// this listener is refused. `fatal` when munged itself is unreachable.
std::string join_one(int fd, const std::string& hello, munge_session& s, clock::time_point deadline, bool& fatal) {
  std::string reply;
  if (!send_line(fd, hello + " " + s.nonce()) ||
      !read_line_timed(fd, reply, std::max(1, ms_until(deadline, 3000)), 4096)) {
    return "busy";
  }
  if (reply == "noauth") return "its munge credential could not be made";
  if (!reply.starts_with("auth ")) return "busy";
  auto body = s.open(reply.substr(5));
  if (!body) {
    fatal = body.error().message().starts_with("could not authenticate");
    send_line(fd, "refused");
    return body.error().message();
  }
  if (*body != "hello") return "an unexpected first message";
  auto cred = s.seal("hello");
  if (!cred) {
    fatal = true;
    return cred.error().message();
  }
  if (!send_line(fd, "auth " + *cred) || !read_line_timed(fd, reply, std::max(1, ms_until(deadline, 3000)), 256))
    return "no answer to this node's credential";
  if (reply != "ok") return fmt::format("it answered '{}'", escape_line(reply, 32));
  return "";
}

}  // namespace

result<rendezvous> rendezvous_join(const std::string& host, std::uint64_t job_id, std::uint64_t step_id,
                                   clock::time_point deadline, const munge_settings& auth,
                                   std::vector<std::string>& refused, int port_attempts) {
  return rendezvous_join(nccl_pair_channel(job_id, step_id, port_attempts), host, deadline, auth, refused);
}

result<rendezvous> rendezvous_join(const pair_channel& ch, const std::string& host, clock::time_point deadline,
                                   const munge_settings& auth, std::vector<std::string>& refused) {
  const int port_attempts = attempts_of(ch);
  if (auto st = munged_reachable(ch, auth); !st) return st;
  const std::string& hello = ch.hello;
  std::string last = "nobody answered";
  // The server may start later than us: walk the whole sequence again until the deadline.
  for (;;) {
    for (int k = 0; k < port_attempts; ++k) {
      if (clock::now() >= deadline) {
        return status::error(fmt::format("{}: no mrcheck of job step {}.{} on {} ({})", ch.name, ch.job_id, ch.step_id,
                                         host.substr(0, 64), last));
      }
      std::uint16_t port = port_of(ch, k);
      struct addrinfo hints {};
      hints.ai_family = AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      struct addrinfo* res = nullptr;
      std::string service = std::to_string(port);
      int gai = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
      if (gai != 0)
        return status::error(fmt::format("{}: resolve {}: {}", ch.name, host.substr(0, 64), ::gai_strerror(gai)));
      for (struct addrinfo* ai = res; ai; ai = ai->ai_next) {
        int fd = connect_timed(ai, std::max(1, ms_until(deadline, 1000)));
        if (fd < 0) continue;
        munge_session s = pair_session(ch, false, auth);
        bool fatal = false;
        std::string why = join_one(fd, hello, s, deadline, fatal);
        if (why.empty()) {
          ::freeaddrinfo(res);
          rendezvous rv{fd, port, k, std::nullopt};
          rv.auth.emplace(std::move(s));
          return rv;
        }
        if (why != "busy") {
          std::string line = fmt::format("{}: refused peer {}: {}", ch.name, peer_text(fd), why);
          if (std::find(refused.begin(), refused.end(), line) == refused.end()) refused.push_back(line);
        }
        last = fmt::format("port {}: {}", port, why);
        ::close(fd);
        if (fatal) {
          ::freeaddrinfo(res);
          return status::error(ch.name + ": " + why);
        }
        break;
      }
      ::freeaddrinfo(res);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(200, ms_until(deadline, 200))));
  }
}

}  // namespace mrcheck::detail
