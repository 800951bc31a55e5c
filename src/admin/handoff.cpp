// Node -> node 0 handoff of node records. Modelled on the NCCL node-pair rendezvous (src/nccl/rendezvous.cpp):
// a port sequence derived from job and step (nccl_pair_port with an admin salt, so an admin listener and a
// NCCL rendezvous of the same step never take each other for the peer), a hello naming job.step, "busy" to a
// peer of another step.
//
// Who may hand in a record: only a peer whose source port is below 1024, i.e. root on its host (the
// collector binds one; users cannot), whose record comes inside root's MUNGE credential for this job step and
// connection (include/mrcheck/munge_auth.h: the port and the address are no secret, the credential is), and whose address is the one Slurm has for the node it speaks for (the
// caller passes the step's node addresses, as slurmctld and slurm.conf have them; the sender binds its own). A
// user on a node of the job can therefore not add or fake a node's verdict, nor can root on a host outside the
// step. Both directions carry a credential: node 0's first answer is root's credential naming the sender's nonce,
// so a user who holds a port of the sequence first is refused (a line in slurmd's log naming it) and the sender
// walks on to node 0's real listener on the next port; its "ok" is root's credential too.
//
// Protocol: sender "mrcheck-admin 2 JOB.STEP NONCE"; node 0 "busy" (another step) or "auth CRED(hello)";
// sender "auth CRED(record)"; node 0 "ok CRED(ok)", "bad", "refused".
#include <mrcheck/admin_record.h>

#include <mrcheck/nccl_probe.h>
#include <mrcheck/units.h>

#include "admin/handoff_io.h"
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
using handoff_io::accept_sealed;
using handoff_io::admin_session;
using handoff_io::hello;
using handoff_io::ms_until;
using handoff_io::read_line;
using handoff_io::send_all;
using handoff_io::send_outcome;
using handoff_io::send_sealed;
constexpr int k_attempts = 8;

std::uint16_t admin_port(std::uint64_t job, std::uint64_t step, int k) {
  return nccl_pair_port(job, step ^ k_admin_port_salt, k);
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

// Connects the non-blocking socket fd to ai, waiting a second at most (less when the deadline is nearer): 0 once
// connected.
int connect_within(int fd, const addrinfo* ai, clock::time_point deadline) {
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
  return rc;
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
                                        std::chrono::milliseconds timeout, const std::vector<std::string>& node_addrs,
                                        const munge_settings& auth) {
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
  std::string from = address_text(reinterpret_cast<sockaddr*>(&peer));
  int port = peer_port(c);
  if (port < 0 || port >= 1024) {
    ::close(c);
    return status::error(
        fmt::format("admin handoff: refused peer {} port {}: an unprivileged port", escape_line(from, 64), port));
  }
  std::string line;
  // The hello and the record each get a short bound of their own: a silent peer cannot hold node 0.
  auto step_until = std::min(until, clock::now() + std::chrono::seconds(2));
  const std::string want = hello(job_id, step_id) + " ";
  if (!read_line(c, line, 128, step_until) || !line.starts_with(want) || line.size() != want.size() + 32) {
    send_all(c, "busy\n");
    ::close(c);
    return status::error(
        fmt::format("admin handoff: peer {} of another step ('{}')", escape_line(from, 64), escape_line(line, 48)));
  }
  munge_session s = admin_session(job_id, step_id, true, auth);
  auto body = accept_sealed(c, s, line.substr(want.size()), until, escape_line(from, 64));
  if (!body) {
    ::close(c);
    return body.error();
  }
  auto r = decode_node_record(*body);
  if (!r) {
    send_all(c, "bad\n");
    ::close(c);
    return r;
  }
  // Only the node itself speaks for its index: the peer's address must be one Slurm has for that node.
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
  auto ok = s.seal("ok");
  if (!ok) {
    ::close(c);
    return status::error("admin handoff: " + ok.error().message());
  }
  send_all(c, "ok " + *ok + "\n");
  ::close(c);  // node 0 closes first: TIME_WAIT stays here, not on the peer's reserved port
  return r;
}

status admin_send_record(const std::string& host, const std::string& source, std::uint64_t job_id,
                         std::uint64_t step_id, const node_record& r, clock::time_point deadline,
                         const munge_settings& auth, std::vector<std::string>& refused, int attempts) {
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
  const std::string record = encode_node_record(r);
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
        if (connect_within(fd, ai, deadline) != 0) {
          ::close(fd);
          continue;
        }
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        send_outcome got = send_sealed(fd, job_id, step_id, record, deadline, auth, source);
        std::string peer = fmt::format("{} port {}", escape_line(address_text(ai->ai_addr), 64), port);
        ::close(fd);
        ::freeaddrinfo(res);
        res = nullptr;
        if (got.what == send_outcome::kind::delivered) return status::ok();
        if (got.what == send_outcome::kind::stop) return status::error(got.why);
        if (!got.why.empty()) {
          std::string line = fmt::format("admin handoff: refused node 0 listener {}: {}", peer, got.why);
          if (std::find(refused.begin(), refused.end(), line) == refused.end()) refused.push_back(line);
        }
        last = fmt::format("port {}: {}", port, got.why.empty() ? "not this step's listener" : got.why);
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
