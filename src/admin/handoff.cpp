// Node -> node 0 handoff of node records. Modelled on the NCCL node-pair rendezvous (src/nccl/rendezvous.cpp):
// a port sequence derived from job and step (nccl_pair_port with an admin salt, so an admin listener and a
// NCCL rendezvous of the same step never take each other for the peer), a hello naming job.step, "busy" to a
// peer of another step.
//
// Who may hand in a record: only a peer whose source port is below 1024, i.e. root on its host (the
// collector binds one; users cannot), and whose address is the one Slurm has for the node it speaks for (the
// caller passes the step's node addresses, as slurmctld and slurm.conf have them; the sender binds its own). A
// user on a node of the job can therefore not add or fake a node's verdict, nor can root on a host outside the
// step; the worst a user can do is hold the port first, and then node 0 reports the other nodes as
// "no report" - a finding in itself.
#include <mrcheck/admin_record.h>

#include <mrcheck/nccl_probe.h>
#include <mrcheck/units.h>

#include "sys/tcp_listen.h"

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
#include <random>
#include <thread>

namespace mrcheck {

namespace {

using clock = std::chrono::steady_clock;
constexpr int k_attempts = 8;

int ms_until(clock::time_point t) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(t - clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1 << 30));
}

std::string hello(std::uint64_t job, std::uint64_t step) { return fmt::format("mrcheck-admin 1 {}.{}", job, step); }

std::uint16_t admin_port(std::uint64_t job, std::uint64_t step, int k) {
  return nccl_pair_port(job, step ^ k_admin_port_salt, k);
}

// One '\n'-terminated line of at most `max` bytes before `until`.
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

int peer_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return -1;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return -1;
}

// An address as text, an IPv4-mapped IPv6 address as the IPv4 one (a dual-stack listener sees IPv4 peers so).
std::string address_text(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  } else if (sa->sa_family == AF_INET6) {
    const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&a)) {
      ::inet_ntop(AF_INET, &a.s6_addr[12], buf, sizeof buf);
    } else {
      ::inet_ntop(AF_INET6, &a, buf, sizeof buf);
    }
  }
  return buf;
}

// The addresses `host` (an address or a name) resolves to; empty when it does not.
std::vector<std::string> host_addresses(const std::string& host) {
  std::vector<std::string> out;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (host.empty() || ::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return out;
  for (addrinfo* ai = res; ai; ai = ai->ai_next) out.push_back(address_text(ai->ai_addr));
  ::freeaddrinfo(res);
  return out;
}

// A socket bound to a free source port in 512..1023 (root only), like bindresvport(3) but for both families,
// on `source` when it is an address of this host (of ai's family), else on any.
int reserved_socket(const addrinfo* ai, const addrinfo* source) {
  static thread_local std::minstd_rand rng(static_cast<unsigned>(::getpid()) ^
                                           static_cast<unsigned>(clock::now().time_since_epoch().count()));
  sockaddr_storage local{};
  socklen_t len = 0;
  if (source && source->ai_family == ai->ai_family && source->ai_addrlen <= sizeof local) {
    std::memcpy(&local, source->ai_addr, source->ai_addrlen);
    len = source->ai_addrlen;
  } else if (ai->ai_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&local);
    a->sin6_family = AF_INET6;
    a->sin6_addr = in6addr_any;
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&local);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_ANY);
    len = sizeof *a;
  }
  int start = 512 + static_cast<int>(rng() % 512);
  for (int i = 0; i < 512; ++i) {
    auto port = htons(static_cast<std::uint16_t>(512 + (start - 512 + i) % 512));
    if (local.ss_family == AF_INET6) {
      reinterpret_cast<sockaddr_in6*>(&local)->sin6_port = port;
    } else {
      reinterpret_cast<sockaddr_in*>(&local)->sin_port = port;
    }
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) return -1;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&local), len) == 0) return fd;
    int e = errno;
    ::close(fd);
    // Not an address of this host (NAT, a name that resolves elsewhere): any address; node 0 decides.
    if (e == EADDRNOTAVAIL && source) return reserved_socket(ai, nullptr);
    if (e != EADDRINUSE) return -1;  // EACCES: not root
  }
  return -1;
}

}  // namespace

admin_listener::~admin_listener() {
  if (fd_ >= 0) ::close(fd_);
}

result<admin_listener> admin_listener::open(std::uint64_t job_id, std::uint64_t step_id, int attempts) {
  if (attempts <= 0) attempts = k_attempts;
  std::string tried;
  for (int k = 0; k < attempts; ++k) {
    std::uint16_t port = admin_port(job_id, step_id, k);
    int err = 0;
    int fd = tcp_listen_any(port, 64, &err);
    if (fd < 0) {
      tried += fmt::format("{}{} ({})", tried.empty() ? "" : ", ", port, std::strerror(err));
      continue;
    }
    admin_listener l;
    l.fd_ = fd;
    l.port_ = port;
    return l;
  }
  return status::error("admin handoff: no free port of the step's sequence: " + tried);
}

result<node_record> admin_accept_record(const admin_listener& l, std::uint64_t job_id, std::uint64_t step_id,
                                        std::chrono::milliseconds timeout, const std::vector<std::string>& node_addrs) {
  auto until = clock::now() + timeout;
  struct pollfd p {
    l.fd(), POLLIN, 0
  };
  int n = ::poll(&p, 1, ms_until(until));
  if (n <= 0) return status::from_errno("admin handoff: nobody connected", n == 0 ? ETIMEDOUT : errno);
  sockaddr_storage peer{};
  socklen_t peer_len = sizeof peer;
  int c = ::accept4(l.fd(), reinterpret_cast<sockaddr*>(&peer), &peer_len, SOCK_CLOEXEC);
  if (c < 0) return status::from_errno("admin handoff: accept", errno);
  int port = peer_port(c);
  if (port < 0 || port >= 1024) {
    ::close(c);
    return status::error(fmt::format("admin handoff: refused a peer from unprivileged port {}", port));
  }
  std::string line;
  // The hello and the record each get a short bound of their own: a silent peer cannot hold node 0.
  auto step_until = std::min(until, clock::now() + std::chrono::seconds(2));
  if (!read_line(c, line, 64, step_until) || line != hello(job_id, step_id)) {
    send_all(c, "busy\n");
    ::close(c);
    return status::error(fmt::format("admin handoff: peer of another step ('{}')", escape_line(line, 48)));
  }
  if (!read_line(c, line, k_node_record_max, std::min(until, clock::now() + std::chrono::seconds(2)))) {
    ::close(c);
    return status::error("admin handoff: no record from the peer in time");
  }
  auto r = decode_node_record(line);
  if (!r) {
    send_all(c, "bad\n");
    ::close(c);
    return r;
  }
  // Only the node itself speaks for its index: the peer's address must be one Slurm has for that node.
  std::string from = address_text(reinterpret_cast<sockaddr*>(&peer));
  std::vector<std::string> known;
  if (r->node_id < node_addrs.size()) known = host_addresses(node_addrs[r->node_id]);
  if (std::find(known.begin(), known.end(), from) == known.end()) {
    send_all(c, "refused\n");
    ::close(c);
    return status::error(
        fmt::format("admin handoff: refused a record for node index {} from {}, not that node's "
                    "address ({})",
                    r->node_id, escape_line(from, 64),
                    r->node_id < node_addrs.size() ? escape_line(node_addrs[r->node_id], 64)
                                                   : std::string("not a node of the step")));
  }
  send_all(c, "ok\n");
  ::close(c);  // node 0 closes first: TIME_WAIT stays here, not on the peer's reserved port
  return r;
}

status admin_send_record(const std::string& host, const std::string& source, std::uint64_t job_id,
                         std::uint64_t step_id, const node_record& r, clock::time_point deadline, int attempts) {
  if (attempts <= 0) attempts = k_attempts;
  addrinfo* src = nullptr;
  if (!source.empty()) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (::getaddrinfo(source.c_str(), nullptr, &hints, &src) != 0) src = nullptr;
  }
  struct free_src {
    addrinfo* p;
    ~free_src() {
      if (p) ::freeaddrinfo(p);
    }
  } src_owner{src};
  std::string msg = hello(job_id, step_id) + "\n" + encode_node_record(r) + "\n";
  std::string last = "nobody answered";
  int round = 0;
  for (;;) {
    for (int k = 0; k < attempts; ++k) {
      if (clock::now() >= deadline) {
        return status::from_errno(fmt::format("admin handoff: node 0 ({}) did not take the record: {}",
                                              escape_line(host, 64), last),
                                  ETIMEDOUT);
      }
      std::uint16_t port = admin_port(job_id, step_id, k);
      addrinfo hints{};
      hints.ai_family = AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      addrinfo* res = nullptr;
      std::string service = std::to_string(port);
      int gai = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
      if (gai != 0) {
        return status::error(fmt::format("admin handoff: resolve {}: {}", escape_line(host, 64), ::gai_strerror(gai)));
      }
      for (addrinfo* ai = res; ai; ai = ai->ai_next) {
        const addrinfo* from = src;
        while (from && from->ai_family != ai->ai_family) from = from->ai_next;
        int fd = reserved_socket(ai, from);
        if (fd < 0) {
          last = fmt::format("no reserved source port: {}", std::strerror(errno ? errno : EACCES));
          continue;
        }
        int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
        if (rc != 0 && errno == EINPROGRESS) {
          struct pollfd p {
            fd, POLLOUT, 0
          };
          int err = ETIMEDOUT;
          if (::poll(&p, 1, std::min(1000, std::max(1, ms_until(deadline)))) == 1) {
            socklen_t len = sizeof err;
            ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
          }
          rc = err == 0 ? 0 : -1;
        }
        if (rc != 0) {
          ::close(fd);
          continue;
        }
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        std::string reply;
        bool sent = send_all(fd, msg) &&
                    read_line(fd, reply, 16, std::min(deadline, clock::now() + std::chrono::seconds(3)));
        ::close(fd);
        ::freeaddrinfo(res);
        res = nullptr;
        if (sent && reply == "ok") return status::ok();
        if (sent && reply == "bad") return status::error("admin handoff: node 0 refused the record as malformed");
        if (sent && reply == "refused") {
          return status::error(
              fmt::format("admin handoff: node 0 refused the record: it did not come from this "
                          "node's address ({})",
                          escape_line(source, 64)));
        }
        last = fmt::format("port {} answered '{}'", port, escape_line(reply, 16));
        break;
      }
      if (res) ::freeaddrinfo(res);
    }
    // Node 0's collector starts at the same moment as ours: retry soon at first, then every 200 ms.
    round = std::min(round + 1, 8);
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(25 * round, ms_until(deadline))));
  }
}

}  // namespace mrcheck
