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
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace mrcheck {

namespace {

using clock = std::chrono::steady_clock;

constexpr int k_ctl_fd = 3;      // rank child: control lines out
constexpr int k_id_fd = 4;       // rank child: the unique id in (ranks != 0)
constexpr int k_release_fd = 5;  // rank child: "go" once every local rank verified (local-pair, gpu-pair)
constexpr std::size_t k_ctl_max = 64 * 1024;

const char* signal_name(int sig) {
  const char* d = sigabbrev_np(sig);
  return d ? d : "?";
}

struct rank_proc {
  nccl_rank_run run;
  std::unique_ptr<child_handle> proc;  // out/err are its pipes; gone once it is reaped and they are closed
  int ctl = -1;
  int id_w = -1;       // our end of the rank's id pipe
  int release_w = -1;  // our end of the rank's release pipe
  std::string ctl_buf;
  bool reaped = false;   // its end is in `run`
  bool sent_id = false;  // rank 0: its id line was seen
  clock::time_point start;
  clock::time_point epoch;  // when the pair began: the timeline's zero
};

constexpr std::size_t k_timeline_max = 32;  // the rank's own stages are 8; the rest is a rank that writes on

// One event of the rank's timeline (nccl_rank_run::timeline_ms), in ms since the pair began.
void mark(rank_proc& p, std::string_view what) {
  if (p.run.timeline_ms.size() >= k_timeline_max) return;
  p.run.timeline_ms.emplace_back(std::string(what),
                                 std::chrono::duration<double, std::milli>(clock::now() - p.epoch).count());
}

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
    struct timespec zero {
      0, 0
    };
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
std::optional<spawn_error> spawn_rank(rank_proc& p, const child_spawner& spawner,
                                      const std::vector<std::string>& argv_s, const std::vector<std::string>& env_s,
                                      bool with_id_pipe, bool with_release) {
  int ctl[2] = {-1, -1}, id[2] = {-1, -1}, rel[2] = {-1, -1};
  auto close_all = [&] {
    for (int* pr : {ctl, id, rel}) {
      close_fd(pr[0]);
      close_fd(pr[1]);
    }
  };
  if (::pipe2(ctl, O_CLOEXEC) != 0 || (with_id_pipe && ::pipe2(id, O_CLOEXEC) != 0) ||
      (with_release && ::pipe2(rel, O_CLOEXEC) != 0)) {
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
  if (with_release) spec.extra_fds.push_back({k_release_fd, rel[0]});
  p.start = clock::now();
  auto c = spawner ? spawner(spec) : spawn_child_process(spec);
  close_fd(ctl[1]);
  close_fd(id[0]);
  close_fd(rel[0]);
  if (!c) {
    close_all();
    return spawn_error{c.error().message()};
  }
  p.proc = std::move(*c);
  p.ctl = ctl[0];
  p.id_w = id[1];
  p.release_w = rel[1];
  p.run.started = true;
  mark(p, "spawned");
  return std::nullopt;
}

bool env_has(const std::vector<std::string>& env, std::string_view key) {
  return std::any_of(env.begin(), env.end(), [&](const std::string& e) {
    return e.size() > key.size() && e.compare(0, key.size(), key) == 0 && e[key.size()] == '=';
  });
}

std::string env_get(const std::vector<std::string>& env, std::string_view key) {
  for (const auto& e : env) {
    if (e.size() > key.size() && e.compare(0, key.size(), key) == 0 && e[key.size()] == '=')
      return e.substr(key.size() + 1);
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
  if (!p.proc || p.reaped) return;
  p.proc->kill_group();
  p.run.killed = true;
}

// Reaps the rank if it has ended by `until` (now: only a look; after kill_rank, time_point::max(): a SIGKILLed
// rank ends).
void reap(rank_proc& p, clock::time_point until) {
  if (!p.proc || p.reaped) return;
  auto end = p.proc->wait_until(until);
  if (!end) return;
  p.reaped = true;
  mark(p, "reaped");
  if (end->lost) return;  // not our child any more (ECHILD): nothing left to wait for
  p.run.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - p.start);
  if (end->exited) {
    p.run.exited = true;
    p.run.exit_code = end->exit_code;
  } else if (end->signaled) {
    // SIGKILL we sent is "killed"; any other signal is the rank's own crash.
    if (!(p.run.killed && end->term_signal == SIGKILL)) {
      p.run.signaled = true;
      p.run.term_signal = end->term_signal;
    }
  }
  // Whatever the rank left in its group goes with it.
  p.proc->kill_group();
}

int pipe_of(const rank_proc& p, child_pipe which) { return p.proc ? p.proc->pipe_fd(which) : -1; }

// Its out and err at EOF (or given up) and its control pipe closed.
bool pipes_closed(const rank_proc& p) {
  return pipe_of(p, child_pipe::out) < 0 && pipe_of(p, child_pipe::err) < 0 && p.ctl < 0;
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

// One run of the pair: the ranks' environment, the rendezvous (node-pair), the spawn, then one loop that reads
// every pipe and the peer socket until each rank is reaped and its pipes are closed, under one deadline.
class pair_run {
 public:
  explicit pair_run(const nccl_pair_options& o) : o_(o), start_(clock::now()), deadline_(start_ + o.timeout) {
    out_.mode = o.mode;
  }

  nccl_pair_outcome run() {
    const std::string& exe = o_.self_exe;
    if (exe.empty() || exe[0] != '/') {
      out_.setup_error = "the mrcheck binary to run the ranks needs an absolute path";
      return std::move(out_);
    }
    std::vector<std::string> env = rank_environment();
    if (o_.mode == nccl_mode::node_pair && !meet_peer()) return std::move(out_);
    if (!spawn_ranks(exe, env)) return std::move(out_);
    while (!settle()) {
      apply_limits();
      if (!poll_once()) break;
    }
    collect();
    return std::move(out_);
  }

 private:
  // The job's environment is the base: its NCCL_* settings (NCCL_IB_HCA, NCCL_NET_GDR_LEVEL, ...) must make the
  // probe fail where the job would. Only what the probe itself needs is overridden, and reported.
  std::vector<std::string> rank_environment() {
    std::vector<std::string> env = o_.env;
    for (const auto& e : env) {
      if (e.starts_with("NCCL_")) out_.user_nccl_env.push_back(escape_line(e, 200));
    }
    auto set = [&](std::string_view k, std::string_view v) {
      env_set(env, k, v);
      out_.env_set.push_back(fmt::format("{}={}", k, v));
    };
    // INFO, narrowed to INIT,NET: the transport ("via NET/IB/0") and "Init timings" lines are INFO-level, and the
    // subsystem filter keeps the volume small. WARN lines print at any level. NCCL writes to stdout unless
    // NCCL_DEBUG_FILE says otherwise, so that is dropped: the log must reach us.
    set("NCCL_DEBUG", "INFO");
    set("NCCL_DEBUG_SUBSYS", o_.verbose ? "INIT,NET,ENV,GRAPH" : "INIT,NET");
    env_unset(env, "NCCL_DEBUG_FILE");
    // The id travels through us; a job-wide NCCL_COMM_ID would make rank 0 listen on the job's own port.
    env_unset(env, "NCCL_COMM_ID");
    if (o_.mode != nccl_mode::node_pair && !env_has(env, "NCCL_SOCKET_IFNAME")) set("NCCL_SOCKET_IFNAME", "lo");
    if (o_.mode == nccl_mode::gpu_pair) {
      set("NCCL_P2P_DISABLE", "1");
      set("NCCL_SHM_DISABLE", "1");
    }
    // One hardware work queue per CUDA context instead of CUDA's 8: each rank runs one all-reduce on one stream,
    // and the pair takes 0.15 s less on an H200, 0.3 s on two H100s (bench/nccl/README.md,
    // docs/facts/nccl-test-harness.md §6). A job that sets its own keeps it: what the job would run with is what
    // the probe tests.
    if (!env_has(env, "CUDA_DEVICE_MAX_CONNECTIONS")) set("CUDA_DEVICE_MAX_CONNECTIONS", "1");

    // NCCL reads these itself (env docs); report them, because a setting there changes what the probe does.
    std::string home = env_get(env, "HOME");
    for (const std::string& f : {std::string("/etc/nccl.conf"), home.empty() ? std::string() : home + "/.nccl.conf"}) {
      if (!f.empty() && sysroot().exists(f)) out_.nccl_conf.push_back(escape_line(f, 200));
    }
    // Whether NCCL's fallback to NET/Socket is a surprise depends on the node having HCAs at all.
    if (auto ib = sysroot().list("/sys/class/infiniband"); ib.is_ok()) out_.rdma_devices = static_cast<int>(ib->size());
    return env;
  }

  // node-pair: meet the other node first; the socket then carries the unique id (and the peer's outcome).
  bool meet_peer() {
    if (o_.pair_rank != 0 && o_.pair_rank != 1) {
      out_.setup_error = "node-pair needs --pair-rank 0 (first node) or 1";
      return false;
    }
    if (o_.pair_rank == 1 && o_.peer.empty()) {
      out_.setup_error = "node-pair rank 1 needs --peer (the first node)";
      return false;
    }
    auto rv = o_.pair_rank == 0
                  ? detail::rendezvous_serve(o_.job_id, o_.step_id, deadline_, o_.auth, out_.refused)
                  : detail::rendezvous_join(o_.peer, o_.job_id, o_.step_id, deadline_, o_.auth, out_.refused);
    if (!rv) {
      out_.setup_error = rv.error().message();
      out_.timed_out = clock::now() >= deadline_;
      out_.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - start_);
      return false;
    }
    peer_fd_ = rv->fd;
    peer_auth_ = std::move(rv->auth);
    out_.port = rv->port;
    local_ranks_ = {o_.pair_rank};
    return true;
  }

  bool spawn_ranks(const std::string& exe, const std::vector<std::string>& env) {
    ranks_.resize(local_ranks_.size());
    const pid_t me = ::getpid();
    for (std::size_t i = 0; i < local_ranks_.size(); ++i) {
      int r = local_ranks_[i];
      rank_proc& p = ranks_[i];
      p.run.rank = r;
      p.epoch = start_;
      std::vector<std::string> renv = env;
      if (o_.mode == nccl_mode::local_pair) {
        // Two "hosts" on one GPU (docs/facts/nccl-test-harness.md §1, §4): the duplicate-GPU check and P2P/SHM need
        // equal host hashes.
        std::string hostid = fmt::format("mrcheck-{}-rank{}", me, r);
        env_set(renv, "NCCL_HOSTID", hostid);
        out_.env_set.push_back(fmt::format("NCCL_HOSTID={} (rank {})", hostid, r));
      }
      int device = o_.mode == nccl_mode::gpu_pair ? r : 0;
      std::vector<std::string> argv = {exe, "probe", "nccl"};
      argv.insert(argv.end(), {"--rank", std::to_string(r), "--nranks", "2", "--device", std::to_string(device),
                               "--ctl-fd", std::to_string(k_ctl_fd), "--count", std::to_string(o_.count)});
      bool with_id = r != 0;
      if (with_id) argv.insert(argv.end(), {"--id-fd", std::to_string(k_id_fd)});
      // node-pair keeps ncclCommDestroy: the other node's rank is not ours to release.
      bool with_release = o_.mode != nccl_mode::node_pair;
      if (with_release) argv.insert(argv.end(), {"--release-fd", std::to_string(k_release_fd)});
      if (!o_.nccl_library.empty()) argv.insert(argv.end(), {"--nccl-library", o_.nccl_library});
      if (auto e = spawn_rank(p, o_.spawn, argv, renv, with_id, with_release)) {
        out_.setup_error = fmt::format("start rank {}: {}", r, e->message);
        for (auto& q : ranks_) {
          kill_rank(q);
          reap(q, clock::time_point::max());
          q.proc.reset();
          for (int* fd : {&q.ctl, &q.id_w, &q.release_w}) close_fd(*fd);
        }
        close_fd(peer_fd_);
        return false;
      }
    }
    return true;
  }

  rank_proc* find_rank(int r) {
    for (auto& p : ranks_) {
      if (p.run.rank == r) return &p;
    }
    return nullptr;
  }

  // Rank 0's id goes to the local rank 1, or to the other node.
  void relay_id(const std::string& line) {
    if (rank_proc* r1 = find_rank(1)) {
      if (r1->id_w >= 0) {
        write_no_sigpipe(r1->id_w, line + "\n");  // 260 bytes < PIPE_BUF: one atomic write
        close_fd(r1->id_w);
      }
    } else {
      send_peer(line);
    }
  }

  void handle_ctl_line(rank_proc& p, std::string_view line) {
    if (line.starts_with("stage ")) {
      p.run.last_stage = escape_line(line.substr(6), 32);
      mark(p, p.run.last_stage);
    } else if (line.starts_with("id ") && p.run.rank == 0 && !p.sent_id) {
      p.sent_id = true;
      relay_id(std::string(line));
    } else if (line.starts_with("result ")) {
      mark(p, "result");
      try {
        p.run.report = nlohmann::json::parse(line.substr(7)).get<nccl_rank_report>();
      } catch (const std::exception& e) {
        p.run.err += fmt::format("mrcheck: nccl rank {}: unreadable result line: {}\n", p.run.rank, e.what());
      }
      release_if_settled();
    }
  }

  void take_ctl(rank_proc& p, const char* data, std::size_t n) {
    bool unused = false;
    append_bounded(p.ctl_buf, data, n, k_ctl_max, unused);
    std::size_t nl;
    while ((nl = p.ctl_buf.find('\n')) != std::string::npos) {
      std::string line = p.ctl_buf.substr(0, nl);
      p.ctl_buf.erase(0, nl + 1);
      handle_ctl_line(p, line);
    }
  }

  // A reaped rank's control lines are all in its pipe (its writes finished before it exited), but maybe not
  // read yet: a rank can send the id, report and exit between two turns of the loop (a busy node, a rank that
  // fails right after ncclGetUniqueId). Whatever a reaped rank said must be read before anything is decided from
  // its being gone: that its id never came, that it failed, what the other node is told. Bounded: a descendant
  // that kept the pipe and writes on must not hold the loop (64 reads pass 1 MiB, the most a pipe can buffer).
  void drain_ctl(rank_proc& p) {
    for (int i = 0; i < 64 && p.reaped && p.ctl >= 0; ++i) {
      struct pollfd f {
        p.ctl, POLLIN, 0
      };
      int n = ::poll(&f, 1, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // nothing more now; a descendant may still hold the pipe (the main loop reads on)
      ssize_t r = ::read(p.ctl, buf_, sizeof buf_);
      if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (r <= 0) {
        close_fd(p.ctl);
        return;
      }
      take_ctl(p, buf_, static_cast<std::size_t>(r));
    }
  }

  // One line to the other node, as a credential of the rendezvous' session: the unique id crosses only so.
  void send_peer(const std::string& line) {
    if (peer_fd_ < 0 || !peer_auth_) return;
    auto cred = peer_auth_->seal(line);
    if (!cred) {
      out_.refused.push_back("nccl pair: not sent to the other node: " + cred.error().message());
      return;
    }
    std::string s = "m " + *cred + "\n";
    (void)!::send(peer_fd_, s.data(), s.size(), MSG_NOSIGNAL);
  }

  // The peer node's lines, each a credential of the session: "id HEX" (we are rank 1), "noid" /
  // "peer-result fail|ok". A line that does not open is the peer's failure (and said so).
  void take_peer(const char* data, std::size_t n) {
    bool dropped = false;
    append_bounded(peer_buf_, data, n, 16384, dropped);
    std::size_t nl;
    while ((nl = peer_buf_.find('\n')) != std::string::npos) {
      std::string sealed = peer_buf_.substr(0, nl);
      peer_buf_.erase(0, nl + 1);
      auto opened = sealed.starts_with("m ") && peer_auth_ ? peer_auth_->open(std::string_view(sealed).substr(2))
                                                           : result<std::string>(status::error("not a credential"));
      if (!opened) {
        out_.refused.push_back("nccl pair: refused a line from the other node: " + opened.error().message());
        peer_failed_ = true;
        if (rank_proc* r1 = find_rank(1)) close_fd(r1->id_w);
        continue;
      }
      const std::string& line = *opened;
      if (line.starts_with("id ")) {
        if (rank_proc* r1 = find_rank(1); r1 && r1->id_w >= 0) {
          write_no_sigpipe(r1->id_w, line + "\n");
          close_fd(r1->id_w);
        }
      } else if (line == "peer-result ok") {
        peer_said_ok_ = true;
      } else if (line == "noid" || line == "peer-result fail") {
        peer_failed_ = true;
        if (rank_proc* r1 = find_rank(1)) close_fd(r1->id_w);
      }
    }
  }

  // Every local rank has verified its sum: "go" to each (they leave without ncclCommDestroy). A rank that
  // failed or ended first: EOF to the others instead, so that a verified rank never waits on its release.
  void release_if_settled() {
    if (released_) return;
    bool all_ok = std::all_of(ranks_.begin(), ranks_.end(),
                              [](const rank_proc& p) { return p.run.report && p.run.report->ok; });
    bool any_done = std::any_of(ranks_.begin(), ranks_.end(),
                                [](const rank_proc& p) { return p.reaped || (p.run.report && !p.run.report->ok); });
    if (!all_ok && !any_done) return;
    released_ = true;
    for (auto& p : ranks_) {
      if (all_ok && p.release_w >= 0) {
        write_no_sigpipe(p.release_w, "go\n");
        mark(p, "released");
      }
      close_fd(p.release_w);
    }
  }

  // Which ranks are done, and does a survivor now wait on a peer that is gone? True when every rank is reaped
  // and its pipes are closed.
  bool settle() {
    for (auto& p : ranks_) {
      reap(p, clock::time_point::min());
      drain_ctl(p);
      // Rank 0 ended or closed its control pipe without an id: rank 1 would block on read forever.
      if (p.run.rank == 0 && !p.sent_id && !noid_handled_ && (p.reaped || p.ctl < 0)) {
        noid_handled_ = true;
        if (rank_proc* r1 = find_rank(1)) close_fd(r1->id_w);
        send_peer("noid");
      }
    }
    release_if_settled();
    bool all_reaped = std::all_of(ranks_.begin(), ranks_.end(), [](const rank_proc& p) { return p.reaped; });
    if (peer_fd_ >= 0 && !told_peer_ && all_reaped) {
      send_peer(fmt::format("peer-result {}", rank_failed(ranks_[0]) ? "fail" : "ok"));
      told_peer_ = true;
    }
    return std::all_of(ranks_.begin(), ranks_.end(), [](const rank_proc& p) { return p.reaped && pipes_closed(p); });
  }

  // The deadline, and the grace a rank gets after its peer failed: past either, every rank is killed and reaped
  // (the loop then drains what they wrote; their pipes are at EOF, nothing else holds them).
  void apply_limits() {
    bool any_failed = std::any_of(ranks_.begin(), ranks_.end(), rank_failed) || peer_failed_;
    bool any_running = std::any_of(ranks_.begin(), ranks_.end(), [](const rank_proc& p) { return !p.reaped; });
    auto now = clock::now();
    if (any_failed && any_running && !grace_until_) grace_until_ = now + o_.peer_grace;
    if (now >= deadline_ || (grace_until_ && now >= *grace_until_ && any_running)) {
      if (now >= deadline_) out_.timed_out = true;
      for (auto& p : ranks_) kill_rank(p);
      for (auto& p : ranks_) reap(p, clock::time_point::max());
    }
  }

  // One poll over every open pipe and the peer socket, and whatever it brings read. False: poll itself failed.
  bool poll_once() {
    std::vector<struct pollfd> fds;
    std::vector<std::pair<rank_proc*, int>> owner;  // (rank, 0 out / 1 err / 2 ctl); nullptr = peer socket
    for (auto& p : ranks_) {
      int which[3] = {pipe_of(p, child_pipe::out), pipe_of(p, child_pipe::err), p.ctl};
      for (int k = 0; k < 3; ++k) {
        if (which[k] >= 0) {
          fds.push_back({which[k], POLLIN, 0});
          owner.emplace_back(&p, k);
        }
      }
    }
    if (peer_fd_ >= 0) {
      fds.push_back({peer_fd_, POLLIN, 0});
      owner.emplace_back(nullptr, 0);
    }
    bool waiting_for_reap = std::any_of(ranks_.begin(), ranks_.end(),
                                        [](const rank_proc& p) { return !p.reaped && pipes_closed(p); });
    auto limit = grace_until_ ? std::min(deadline_, *grace_until_) : deadline_;
    long long wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(limit - clock::now()).count() + 1;
    // Reaping is by looking (child_handle::wait_until with a deadline already gone): a short tick while a rank
    // has closed its pipes but not yet been reaped, and a bounded one otherwise (no SIGCHLD handler: the caller's
    // signal dispositions are left alone).
    wait_ms = std::clamp<long long>(wait_ms, 0, waiting_for_reap ? 5 : 100);
    bool all_reaped = std::all_of(ranks_.begin(), ranks_.end(), [](const rank_proc& p) { return p.reaped; });
    int n = ::poll(fds.data(), fds.size(), all_reaped ? 0 : static_cast<int>(wait_ms));
    if (n < 0 && errno != EINTR) return false;
    bool read_any = false;
    for (std::size_t i = 0; n > 0 && i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      auto [p, k] = owner[i];
      if (p && k < 2) {  // the rank's out or err: a bounded read through its handle, which closes it at EOF
        child_pipe which = k == 0 ? child_pipe::out : child_pipe::err;
        read_any |= p->proc->read_bounded(which, k == 0 ? p->run.out : p->run.err, o_.max_output, p->run.truncated);
        continue;
      }
      ssize_t r = p ? ::read(fds[i].fd, buf_, sizeof buf_) : ::recv(fds[i].fd, buf_, sizeof buf_, 0);
      if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (r <= 0) {
        if (p) {
          close_fd(p->ctl);
        } else {
          // The other node hung up: fine once it reported success, a failure of its side otherwise.
          if (!peer_said_ok_) peer_failed_ = true;
          close_fd(peer_fd_);
        }
        continue;
      }
      read_any = true;
      auto n_read = static_cast<std::size_t>(r);
      if (!p) {
        take_peer(buf_, n_read);
      } else {
        take_ctl(*p, buf_, n_read);
      }
    }
    if (all_reaped && !read_any) {
      // Every rank is reaped and nothing more came: whatever still holds a pipe is not ours to wait for.
      for (auto& p : ranks_) {
        p.proc.reset();
        close_fd(p.ctl);
      }
    }
    return true;
  }

  // Everything closed; each rank's run and the log facts merged over the local ranks go into the outcome.
  void collect() {
    for (auto& p : ranks_) {
      close_fd(p.id_w);
      close_fd(p.release_w);
      p.proc.reset();
      close_fd(p.ctl);
    }
    close_fd(peer_fd_);
    out_.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - start_);
    for (auto& p : ranks_) {
      nccl_log_facts f = parse_nccl_log(p.run.out);
      merge_nccl_log_facts(f, parse_nccl_log(p.run.err));
      if (out_.ranks.empty()) {
        out_.log = std::move(f);
      } else {
        merge_nccl_log_facts(out_.log, f);
      }
      out_.ranks.push_back(std::move(p.run));
    }
  }

  const nccl_pair_options& o_;
  const clock::time_point start_;
  const clock::time_point deadline_;
  nccl_pair_outcome out_;
  std::vector<int> local_ranks_ = {0, 1};
  std::vector<rank_proc> ranks_;
  int peer_fd_ = -1;
  std::optional<munge_session> peer_auth_;
  std::string peer_buf_;
  bool peer_failed_ = false;
  bool peer_said_ok_ = false;
  bool told_peer_ = false;
  bool noid_handled_ = false;
  bool released_ = false;
  std::optional<clock::time_point> grace_until_;
  char buf_[16384];
};

}  // namespace

std::string nccl_rank_run::describe() const {
  if (killed) return "killed by mrcheck";
  if (signaled) return fmt::format("killed by SIG{}", signal_name(term_signal));
  if (exited) return fmt::format("exit {}", exit_code);
  return started ? "did not finish" : "not started";
}

nccl_pair_outcome run_nccl_pair(const nccl_pair_options& o) { return pair_run(o).run(); }

}  // namespace mrcheck
