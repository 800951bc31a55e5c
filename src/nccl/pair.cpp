// The orchestrator of the NCCL pair probe: spawns the rank children (re-exec of mrcheck), relays rank 0's
// unique id, captures NCCL's output, bounds everything with one deadline and leaves no process behind.
// It never loads CUDA or NCCL itself (the SPANK plugin's helper runs this code).
#include <mrcheck/child.h>
#include <mrcheck/nccl_probe.h>
#include <mrcheck/sysroot.h>
#include <mrcheck/units.h>

#include "nccl/rendezvous.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace mrcheck {

namespace {

using clock = std::chrono::steady_clock;

constexpr int k_ctl_fd = 3;  // rank child: control lines out
constexpr int k_id_fd = 4;   // rank child: the unique id in (ranks != 0)
constexpr std::size_t k_ctl_max = 64 * 1024;

const char* signal_name(int sig) {
  const char* d = sigabbrev_np(sig);
  return d ? d : "?";
}

struct rank_proc {
  nccl_rank_run run;
  pid_t pid = -1;
  int out = -1;
  int err = -1;
  int ctl = -1;
  int id_w = -1;  // our end of the rank's id pipe
  std::string ctl_buf;
  bool reaped = false;
  bool sent_id = false;  // rank 0: its id line was seen
  clock::time_point start;
};

// write() to a pipe whose reader died raises SIGPIPE; the orchestrator runs inside callers whose signal
// dispositions it must not change, so SIGPIPE is blocked around the write and a pending one consumed.
void write_no_sigpipe(int fd, const std::string& s) {
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  ssize_t w;
  do {
    w = ::write(fd, s.data(), s.size());
  } while (w < 0 && errno == EINTR);
  if (w < 0 && errno == EPIPE) {
    struct timespec zero {0, 0};
    while (::sigtimedwait(&pipe_set, nullptr, &zero) == SIGPIPE) {
    }
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

struct spawn_error {
  std::string message;
};

// Starts one rank child; on failure returns the reason and leaves nothing running.
std::optional<spawn_error> spawn_rank(rank_proc& p, const std::vector<std::string>& argv_s,
                                      const std::vector<std::string>& env_s, bool with_id_pipe) {
  int ctl[2] = {-1, -1}, id[2] = {-1, -1};
  auto close_all = [&] {
    for (int* pr : {ctl, id}) {
      close_fd(pr[0]);
      close_fd(pr[1]);
    }
  };
  if (::pipe2(ctl, O_CLOEXEC) != 0 || (with_id_pipe && ::pipe2(id, O_CLOEXEC) != 0)) {
    int e = errno;
    close_all();
    return spawn_error{fmt::format("pipe: {}", std::strerror(e))};
  }
  child_spec spec;
  spec.argv = argv_s;
  spec.env = env_s;
  // Own group, so a kill of the group takes whatever the rank started; and death with the orchestrator, so a
  // SIGKILL of mrcheck (the plugin's timeout) cannot leave a rank holding the GPU.
  spec.own_group = true;
  spec.die_with_parent = true;
  spec.reset_oom_score_adj = false;
  spec.extra_fds.push_back({k_ctl_fd, ctl[1]});
  if (with_id_pipe) spec.extra_fds.push_back({k_id_fd, id[0]});
  p.start = clock::now();
  auto c = spawn_child(spec);
  close_fd(ctl[1]);
  close_fd(id[0]);
  if (!c) {
    close_all();
    return spawn_error{c.error().message()};
  }
  close_fd(c->pidfd);
  p.pid = c->pid;
  p.out = c->out;
  p.err = c->err;
  p.ctl = ctl[0];
  p.id_w = id[1];
  p.run.started = true;
  return std::nullopt;
}

bool env_has(const std::vector<std::string>& env, std::string_view key) {
  return std::any_of(env.begin(), env.end(), [&](const std::string& e) {
    return e.size() > key.size() && e.compare(0, key.size(), key) == 0 && e[key.size()] == '=';
  });
}

std::string env_get(const std::vector<std::string>& env, std::string_view key) {
  for (const auto& e : env) {
    if (e.size() > key.size() && e.compare(0, key.size(), key) == 0 && e[key.size()] == '=') return e.substr(key.size() + 1);
  }
  return {};
}

void env_set(std::vector<std::string>& env, std::string_view key, std::string_view value) {
  std::erase_if(env, [&](const std::string& e) {
    return e.size() > key.size() && e.compare(0, key.size(), key) == 0 && e[key.size()] == '=';
  });
  env.push_back(fmt::format("{}={}", key, value));
}

void env_unset(std::vector<std::string>& env, std::string_view key) {
  std::erase_if(env, [&](const std::string& e) {
    return e.size() > key.size() && e.compare(0, key.size(), key) == 0 && e[key.size()] == '=';
  });
}

void kill_rank(rank_proc& p) {
  if (p.pid <= 0 || p.reaped) return;
  ::kill(-p.pid, SIGKILL);
  ::kill(p.pid, SIGKILL);
  p.run.killed = true;
}

void reap(rank_proc& p, bool block) {
  if (p.pid <= 0 || p.reaped) return;
  int ws = 0;
  pid_t w;
  do {
    w = ::waitpid(p.pid, &ws, block ? 0 : WNOHANG);
  } while (w < 0 && errno == EINTR);
  if (w != p.pid) {
    if (w < 0) p.reaped = true;  // not our child any more (ECHILD): nothing left to wait for
    return;
  }
  p.reaped = true;
  p.run.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - p.start);
  if (WIFEXITED(ws)) {
    p.run.exited = true;
    p.run.exit_code = WEXITSTATUS(ws);
  } else if (WIFSIGNALED(ws)) {
    // SIGKILL we sent is "killed"; any other signal is the rank's own crash.
    if (!(p.run.killed && WTERMSIG(ws) == SIGKILL)) {
      p.run.signaled = true;
      p.run.term_signal = WTERMSIG(ws);
    }
  }
  // Whatever the rank left in its group goes with it.
  ::kill(-p.pid, SIGKILL);
}

// A rank that ended without a verified all-reduce: its peer will wait in NCCL forever.
bool rank_failed(const rank_proc& p) {
  if (!p.reaped) return false;
  return !(p.run.exited && p.run.exit_code == 0 && p.run.report && p.run.report->ok);
}

void append_bounded(std::string& to, const char* data, std::size_t n, std::size_t max, bool& truncated) {
  std::size_t room = max > to.size() ? max - to.size() : 0;
  std::size_t take = std::min(room, n);
  to.append(data, take);
  if (take < n) truncated = true;
}

}  // namespace

std::string nccl_rank_run::describe() const {
  if (killed) return "killed by mrcheck";
  if (signaled) return fmt::format("killed by SIG{}", signal_name(term_signal));
  if (exited) return fmt::format("exit {}", exit_code);
  return started ? "did not finish" : "not started";
}

nccl_pair_outcome run_nccl_pair(const nccl_pair_options& o) {
  nccl_pair_outcome out;
  out.mode = o.mode;
  const auto start = clock::now();
  const auto deadline = start + o.timeout;
  if (o.self_exe.empty() || o.self_exe[0] != '/') {
    out.setup_error = "the mrcheck binary to run the ranks needs an absolute path";
    return out;
  }

  // The job's environment is the base: its NCCL_* settings (NCCL_IB_HCA, NCCL_NET_GDR_LEVEL, ...) must make the
  // probe fail where the job would. Only what the probe itself needs is overridden, and reported.
  std::vector<std::string> env = o.env;
  for (const auto& e : env) {
    if (e.starts_with("NCCL_")) out.user_nccl_env.push_back(escape_line(e, 200));
  }
  std::vector<std::string> set_common;
  auto set = [&](std::string_view k, std::string_view v) {
    env_set(env, k, v);
    set_common.push_back(fmt::format("{}={}", k, v));
  };
  // INFO, narrowed to INIT,NET: the transport ("via NET/IB/0") and "Init timings" lines are INFO-level, and the
  // subsystem filter keeps the volume small. WARN lines print at any level. NCCL writes to stdout unless
  // NCCL_DEBUG_FILE says otherwise, so that is dropped: the log must reach us.
  set("NCCL_DEBUG", "INFO");
  set("NCCL_DEBUG_SUBSYS", o.verbose ? "INIT,NET,ENV,GRAPH" : "INIT,NET");
  env_unset(env, "NCCL_DEBUG_FILE");
  // The id travels through us; a job-wide NCCL_COMM_ID would make rank 0 listen on the job's own port.
  env_unset(env, "NCCL_COMM_ID");
  if (o.mode != nccl_mode::node_pair && !env_has(env, "NCCL_SOCKET_IFNAME")) set("NCCL_SOCKET_IFNAME", "lo");
  if (o.mode == nccl_mode::gpu_pair) {
    set("NCCL_P2P_DISABLE", "1");
    set("NCCL_SHM_DISABLE", "1");
  }
  out.env_set = set_common;

  // NCCL reads these itself (env docs); report them, because a setting there changes what the probe does.
  std::string home = env_get(env, "HOME");
  for (const std::string& f : {std::string("/etc/nccl.conf"), home.empty() ? std::string() : home + "/.nccl.conf"}) {
    struct stat st {};
    if (!f.empty() && ::stat(f.c_str(), &st) == 0) out.nccl_conf.push_back(escape_line(f, 200));
  }

  // Whether NCCL's fallback to NET/Socket is a surprise depends on the node having HCAs at all.
  if (auto ib = sysroot().list("/sys/class/infiniband"); ib.is_ok()) out.rdma_devices = static_cast<int>(ib->size());

  // node-pair: meet the other node first; the socket then carries the unique id (and the peer's outcome).
  int peer_fd = -1;
  std::string peer_buf;
  bool peer_failed = false;
  bool peer_said_ok = false;
  std::vector<int> local_ranks = {0, 1};
  if (o.mode == nccl_mode::node_pair) {
    if (o.pair_rank != 0 && o.pair_rank != 1) {
      out.setup_error = "node-pair needs --pair-rank 0 (first node) or 1";
      return out;
    }
    if (o.pair_rank == 1 && o.peer.empty()) {
      out.setup_error = "node-pair rank 1 needs --peer (the first node)";
      return out;
    }
    auto rv = o.pair_rank == 0 ? detail::rendezvous_serve(o.job_id, o.step_id, deadline)
                               : detail::rendezvous_join(o.peer, o.job_id, o.step_id, deadline);
    if (!rv) {
      out.setup_error = rv.error().message();
      out.timed_out = clock::now() >= deadline;
      out.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - start);
      return out;
    }
    peer_fd = rv->fd;
    out.port = rv->port;
    local_ranks = {o.pair_rank};
  }

  std::vector<rank_proc> ranks(local_ranks.size());
  const pid_t me = ::getpid();
  for (std::size_t i = 0; i < local_ranks.size(); ++i) {
    int r = local_ranks[i];
    rank_proc& p = ranks[i];
    p.run.rank = r;
    std::vector<std::string> renv = env;
    if (o.mode == nccl_mode::local_pair) {
      // Two "hosts" on one GPU (docs/facts/nccl-test-harness.md §1, §4): the duplicate-GPU check and P2P/SHM need equal
      // host hashes.
      std::string hostid = fmt::format("mrcheck-{}-rank{}", me, r);
      env_set(renv, "NCCL_HOSTID", hostid);
      out.env_set.push_back(fmt::format("NCCL_HOSTID={} (rank {})", hostid, r));
    }
    int device = o.mode == nccl_mode::gpu_pair ? r : 0;
    std::vector<std::string> argv = {o.self_exe, "probe", "nccl", "--rank", std::to_string(r), "--nranks", "2",
                                     "--device", std::to_string(device), "--ctl-fd", std::to_string(k_ctl_fd),
                                     "--count", std::to_string(o.count)};
    bool with_id = r != 0;
    if (with_id) argv.insert(argv.end(), {"--id-fd", std::to_string(k_id_fd)});
    if (!o.nccl_library.empty()) argv.insert(argv.end(), {"--nccl-library", o.nccl_library});
    if (!o.fake[static_cast<std::size_t>(r)].empty()) argv.insert(argv.end(), {"--fake", o.fake[static_cast<std::size_t>(r)]});
    if (auto e = spawn_rank(p, argv, renv, with_id)) {
      out.setup_error = fmt::format("start rank {}: {}", r, e->message);
      for (auto& q : ranks) {
        kill_rank(q);
        reap(q, true);
        for (int* fd : {&q.out, &q.err, &q.ctl, &q.id_w}) close_fd(*fd);
      }
      close_fd(peer_fd);
      return out;
    }
  }

  auto find_rank = [&](int r) -> rank_proc* {
    for (auto& p : ranks) {
      if (p.run.rank == r) return &p;
    }
    return nullptr;
  };
  auto relay_id = [&](const std::string& line) {
    if (rank_proc* r1 = find_rank(1)) {
      if (r1->id_w >= 0) {
        write_no_sigpipe(r1->id_w, line + "\n");  // 260 bytes < PIPE_BUF: one atomic write
        close_fd(r1->id_w);
      }
    } else if (peer_fd >= 0) {
      std::string s = line + "\n";
      (void)!::send(peer_fd, s.data(), s.size(), MSG_NOSIGNAL);
    }
  };
  auto handle_ctl_line = [&](rank_proc& p, std::string_view line) {
    if (line.starts_with("stage ")) {
      p.run.last_stage = escape_line(line.substr(6), 32);
    } else if (line.starts_with("id ") && p.run.rank == 0 && !p.sent_id) {
      p.sent_id = true;
      relay_id(std::string(line));
    } else if (line.starts_with("result ")) {
      try {
        p.run.report = nlohmann::json::parse(line.substr(7)).get<nccl_rank_report>();
      } catch (const std::exception& e) {
        p.run.err += fmt::format("mrcheck: nccl rank {}: unreadable result line: {}\n", p.run.rank, e.what());
      }
    }
  };

  auto take_ctl = [&](rank_proc& p, const char* data, std::size_t n) {
    bool unused = false;
    append_bounded(p.ctl_buf, data, n, k_ctl_max, unused);
    std::size_t nl;
    while ((nl = p.ctl_buf.find('\n')) != std::string::npos) {
      std::string line = p.ctl_buf.substr(0, nl);
      p.ctl_buf.erase(0, nl + 1);
      handle_ctl_line(p, line);
    }
  };
  char buf[16384];
  // A reaped rank's control lines are all in its pipe (its writes finished before it exited), but maybe not
  // read yet: a rank can send the id, report and exit between two turns of the loop below (a busy node, a
  // rank that fails right after ncclGetUniqueId). Whatever a reaped rank said must be read before anything is
  // decided from its being gone: that its id never came, that it failed, what the other node is told.
  // Bounded: a descendant that kept the pipe and writes on must not hold the loop (64 reads pass 1 MiB, the
  // most a pipe can buffer).
  auto drain_ctl = [&](rank_proc& p) {
    for (int i = 0; i < 64 && p.reaped && p.ctl >= 0; ++i) {
      struct pollfd f {p.ctl, POLLIN, 0};
      int n = ::poll(&f, 1, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // nothing more now; a descendant may still hold the pipe (the main loop reads on)
      ssize_t r = ::read(p.ctl, buf, sizeof buf);
      if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (r <= 0) {
        close_fd(p.ctl);
        return;
      }
      take_ctl(p, buf, static_cast<std::size_t>(r));
    }
  };

  std::optional<clock::time_point> grace_until;
  bool told_peer = false;
  bool noid_handled = false;
  for (;;) {
    // Which ranks are done, and does a survivor now wait on a peer that is gone?
    for (auto& p : ranks) {
      reap(p, false);
      drain_ctl(p);
      // Rank 0 ended or closed its control pipe without an id: rank 1 would block on read forever.
      if (p.run.rank == 0 && !p.sent_id && !noid_handled && (p.reaped || p.ctl < 0)) {
        noid_handled = true;
        if (rank_proc* r1 = find_rank(1)) close_fd(r1->id_w);
        if (peer_fd >= 0) (void)!::send(peer_fd, "noid\n", 5, MSG_NOSIGNAL);
      }
    }
    bool all_done = std::all_of(ranks.begin(), ranks.end(), [](const rank_proc& p) {
      return p.reaped && p.out < 0 && p.err < 0 && p.ctl < 0;
    });
    if (peer_fd >= 0 && !told_peer && std::all_of(ranks.begin(), ranks.end(), [](const rank_proc& p) { return p.reaped; })) {
      std::string s = fmt::format("peer-result {}\n", rank_failed(ranks[0]) ? "fail" : "ok");
      (void)!::send(peer_fd, s.data(), s.size(), MSG_NOSIGNAL);
      told_peer = true;
    }
    if (all_done) break;
    bool any_failed = std::any_of(ranks.begin(), ranks.end(), rank_failed) || peer_failed;
    bool any_running = std::any_of(ranks.begin(), ranks.end(), [](const rank_proc& p) { return !p.reaped; });
    auto now = clock::now();
    if (any_failed && any_running && !grace_until) grace_until = now + o.peer_grace;
    if (now >= deadline || (grace_until && now >= *grace_until && any_running)) {
      if (now >= deadline) out.timed_out = true;
      for (auto& p : ranks) kill_rank(p);
      for (auto& p : ranks) reap(p, true);
      // Drain what the killed ranks wrote before dying; their pipes are at EOF now (nothing else holds them).
    }

    std::vector<struct pollfd> fds;
    std::vector<std::pair<rank_proc*, int>> owner;  // (rank, 0 out / 1 err / 2 ctl); nullptr = peer socket
    for (auto& p : ranks) {
      int* which[3] = {&p.out, &p.err, &p.ctl};
      for (int k = 0; k < 3; ++k) {
        if (*which[k] >= 0) {
          fds.push_back({*which[k], POLLIN, 0});
          owner.emplace_back(&p, k);
        }
      }
    }
    if (peer_fd >= 0) {
      fds.push_back({peer_fd, POLLIN, 0});
      owner.emplace_back(nullptr, 0);
    }
    bool waiting_for_reap = std::any_of(ranks.begin(), ranks.end(), [](const rank_proc& p) {
      return !p.reaped && p.out < 0 && p.err < 0 && p.ctl < 0;
    });
    auto limit = grace_until ? std::min(deadline, *grace_until) : deadline;
    long long wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(limit - clock::now()).count() + 1;
    // Reaping is by polling waitpid: a short tick while a rank has closed its pipes but not yet been reaped,
    // and a bounded one otherwise (no SIGCHLD handler: the caller's signal dispositions are left alone).
    wait_ms = std::clamp<long long>(wait_ms, 0, waiting_for_reap ? 5 : 100);
    bool killed_all = std::all_of(ranks.begin(), ranks.end(), [](const rank_proc& p) { return p.reaped; });
    int n = ::poll(fds.data(), fds.size(), killed_all ? 0 : static_cast<int>(wait_ms));
    if (n < 0 && errno != EINTR) break;
    bool read_any = false;
    for (std::size_t i = 0; n > 0 && i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      auto [p, k] = owner[i];
      ssize_t r = p ? ::read(fds[i].fd, buf, sizeof buf) : ::recv(fds[i].fd, buf, sizeof buf, 0);
      if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (r <= 0) {
        if (p) {
          close_fd(k == 0 ? p->out : k == 1 ? p->err : p->ctl);
        } else {
          // The other node hung up: fine once it reported success, a failure of its side otherwise.
          if (!peer_said_ok) peer_failed = true;
          close_fd(peer_fd);
        }
        continue;
      }
      read_any = true;
      auto n_read = static_cast<std::size_t>(r);
      if (!p) {
        bool dropped = false;
        append_bounded(peer_buf, buf, n_read, 4096, dropped);
        // The peer node's lines: "id HEX" (we are rank 1), "noid" / "peer-result fail|ok".
        std::size_t nl;
        while ((nl = peer_buf.find('\n')) != std::string::npos) {
          std::string line = peer_buf.substr(0, nl);
          peer_buf.erase(0, nl + 1);
          if (line.starts_with("id ")) {
            if (rank_proc* r1 = find_rank(1); r1 && r1->id_w >= 0) {
              write_no_sigpipe(r1->id_w, line + "\n");
              close_fd(r1->id_w);
            }
          } else if (line == "peer-result ok") {
            peer_said_ok = true;
          } else if (line == "noid" || line == "peer-result fail") {
            peer_failed = true;
            if (rank_proc* r1 = find_rank(1)) close_fd(r1->id_w);
          }
        }
        continue;
      }
      if (k == 2) {
        take_ctl(*p, buf, n_read);
      } else {
        append_bounded(k == 0 ? p->run.out : p->run.err, buf, n_read, o.max_output, p->run.truncated);
      }
    }
    if (killed_all && !read_any) {
      // Every rank is reaped and nothing more came: whatever still holds a pipe is not ours to wait for.
      for (auto& p : ranks) {
        for (int* fd : {&p.out, &p.err, &p.ctl}) close_fd(*fd);
      }
    }
  }
  for (auto& p : ranks) {
    close_fd(p.id_w);
    for (int* fd : {&p.out, &p.err, &p.ctl}) close_fd(*fd);
  }
  close_fd(peer_fd);
  out.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - start);
  for (auto& p : ranks) {
    nccl_log_facts f = parse_nccl_log(p.run.out);
    merge_nccl_log_facts(f, parse_nccl_log(p.run.err));
    if (out.ranks.empty()) {
      out.log = std::move(f);
    } else {
      merge_nccl_log_facts(out.log, f);
    }
    out.ranks.push_back(std::move(p.run));
  }
  return out;
}

}  // namespace mrcheck
