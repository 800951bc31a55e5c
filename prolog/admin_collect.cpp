// `mrcheck-prolog admin-collect`: the root collector of one node of one checked job step (docs/DESIGN.md §3).
//
// Started by the SPANK plugin in slurmstepd's main process (init_post_opt, as root, before the tasks fork) with
//   fd 3  a control socket (admin_record.h, admin_read_control): local task 0 sends the read end of its record
//         pipe over it, into which it writes its node record (one JSON line), the node's report (one JSON line)
//         and "end"; slurmstepd sends "tasks ended" once every local task has ended
//   fd 4  the write end of a pipe slurmstepd reads: our "mrcheck: ..." log lines; its EOF says we are done
// Node 0 listens for the other nodes' records (admin_accept_record), waits for them at most report_timeout
// after its own, formats the step record, and writes it with slurm_load_job + slurm_update_job + a read back
// (write_admin_comment): three controller RPCs per step whatever the number of tasks and nodes, two more for
// each retry. Other nodes send their record to node 0. In a step of several nodes every collector also reads the
// step's node list from slurmctld (load_step_nodes: one REQUEST_STEP_LAYOUT per node and step).
// It detaches first (admin_protocol.h), so a step cancelled before node 0 collected still gets a record:
// "cancelled; no report from ..." when node 0's task began checking and ended without its record.
// Every node writes its JSON report to report_dir= when set, with the node's stack fingerprint as the prolog
// last saw it in this boot (state_dir's history, include/mrcheck/history_store.h), so `mrcheck fleet` over
// report_dir compares every fact; the job user's task never supplies it.
//
// Trust: the arguments come from slurmstepd (root); the pipe's content from the task child, which runs as the
// job user before exec, so it is parsed strictly and re-escaped - it can only change what its own node says.
// The control socket reaches no process of the job user's own code (close-on-exec, closed in task_init): only
// the first valid record pipe is taken (a FIFO open for reading), every other descriptor is closed unread.
// The environment is slurmstepd's, never the job's. The step's nodes come from slurmctld and their addresses
// from slurm.conf, never from the job's SLURM_STEP_NODELIST (the job user's srun writes that): a collector
// connects only to node 0 of its step, and node 0 takes a record only from the address of the node it is for.
// alarm() bounds the whole run, libslurm included.
#include "admin_collect.h"

#include <mrcheck/admin_protocol.h>

#include <mrcheck/admin_record.h>
#include <mrcheck/history_store.h>
#include <mrcheck/units.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "slurm_api.h"

namespace mrcheck::prolog {

namespace {

using clock = std::chrono::steady_clock;

constexpr int k_control_fd = k_admin_control_fd;
constexpr int k_log_fd = k_admin_log_fd;
constexpr std::size_t k_pipe_max = k_admin_message_max;

struct collect_args {
  std::uint32_t job = 0;
  std::uint32_t step = 0;
  std::uint32_t node_id = 0;
  std::uint32_t nnodes = 1;
  std::string node;  // SLURMD_NODENAME of this node
  bool admin_comment = false;
  std::string report_dir;
  std::string state_dir;  // where mrcheck-prolog keeps the stack history ("" = no stack in report_dir files)
  std::size_t max = 4096;
  std::chrono::milliseconds timeout{10000};  // report_timeout
  std::chrono::milliseconds own{120000};     // how long the task may take to hand in its record (probes)
  munge_settings auth;                       // slurmstepd's slurm.conf: munged's socket, ClusterName
};

// "E mrcheck: ..." (slurm_error in slurmd's log) or "I mrcheck: ..." (slurm_info). Non-blocking: a line that
// does not fit the pipe is dropped rather than holding the collector.
void log_line(char level, const std::string& s) {
  std::string l = fmt::format("{} {}\n", level, escape_line(s, 1000));
  ssize_t w = ::write(k_log_fd, l.data(), l.size());
  (void)w;
}

template <class... A>
void logf(fmt::format_string<A...> f, A&&... a) {
  log_line('E', fmt::format(f, std::forward<A>(a)...));
}
template <class... A>
void logi(fmt::format_string<A...> f, A&&... a) {
  log_line('I', fmt::format(f, std::forward<A>(a)...));
}

template <class T>
bool parse_num(std::string_view s, T& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

std::optional<collect_args> parse(int argc, char** argv) {
  collect_args a;
  for (int i = 0; i + 1 < argc; i += 2) {
    std::string_view k = argv[i];
    std::string_view v = argv[i + 1];
    bool ok = true;
    std::uint64_t ms = 0;
    if (k == "--job")
      ok = parse_num(v, a.job);
    else if (k == "--step")
      ok = parse_num(v, a.step);
    else if (k == "--node-id")
      ok = parse_num(v, a.node_id);
    else if (k == "--nnodes")
      ok = parse_num(v, a.nnodes) && a.nnodes > 0 && a.nnodes <= 100000;
    else if (k == "--node")
      a.node = std::string(v.substr(0, 64));
    else if (k == "--admin-comment")
      a.admin_comment = v == "1";
    else if (k == "--report-dir")
      a.report_dir = std::string(v);
    else if (k == "--state-dir")
      a.state_dir = std::string(v);
    else if (k == "--max")
      ok = parse_num(v, a.max);
    else if (k == "--timeout-ms")
      ok = parse_num(v, ms), a.timeout = std::chrono::milliseconds(ms);
    else if (k == "--own-ms")
      ok = parse_num(v, ms), a.own = std::chrono::milliseconds(ms);
    else
      ok = false;
    if (!ok) {
      logf("mrcheck: admin: collector: bad argument {} '{}'", escape_line(k, 32), escape_line(v, 64));
      return std::nullopt;
    }
  }
  return a;
}

// The node name as a file name part for report_dir ([A-Za-z0-9._-]), else "node<id>".
std::string file_node(const collect_args& a) {
  bool ok = !a.node.empty() && a.node.size() <= 64 && a.node != "." && a.node != ".." &&
            std::all_of(a.node.begin(), a.node.end(),
                        [](unsigned char c) { return std::isalnum(c) || c == '-' || c == '_' || c == '.'; });
  return ok ? a.node : fmt::format("node{}", a.node_id);
}

// The step's nodes as slurmctld has them, by node index, and the address Slurm has for each (NodeAddr).
struct step_nodes {
  std::vector<std::string> names;
  std::vector<std::string> addrs;
};

// One REQUEST_STEP_LAYOUT. Empty (with a log line) when slurmctld does not answer or its list does not fit what
// slurmstepd told this collector (node count, this node's name at its index).
step_nodes load_step_nodes(const collect_args& a) {
  step_nodes n;
#ifdef MRCHECK_HAVE_SLURM
  slurm_api::init();
  std::string list;
  if (int rc = slurm_api::load_step_nodelist(a.job, a.step, list); rc != 0) {
    logf("mrcheck: admin: job {} {}: the step's node list from slurmctld: {}", a.job, step_label(a.step),
         escape_line(slurm_api::error_text(rc), 200));
    return n;
  }
  n.names = slurm_api::expand_hostlist(list, a.nnodes + 1);
  if (n.names.size() != a.nnodes || n.names[a.node_id] != a.node) {
    logf("mrcheck: admin: job {} {}: slurmctld's node list '{}' is not this step's ({} nodes, {} at index {})", a.job,
         step_label(a.step), escape_line(list, 200), a.nnodes, escape_line(a.node, 64), a.node_id);
    n.names.clear();
    return n;
  }
  for (const auto& name : n.names) n.addrs.push_back(slurm_api::node_address(name));
#else
  logf("mrcheck: admin: job {} {}: built without libslurm, the step's node list is unknown", a.job, step_label(a.step));
#endif
  return n;
}

#ifdef MRCHECK_HAVE_SLURM
// Concurrent steps of one job (`srun ... & srun ... &`) would each read, append and write AdminComment and
// could drop each other's record. Collectors on one node take turns on a root-owned lock file in /run; steps
// whose node 0 differ still race (Slurm has no compare-and-swap for job updates). Bounded: after 5 s the
// update goes ahead without the lock. The fd is closed (unlocked) when the process ends.
void lock_node_updates() {
  int fd = ::open("/run/mrcheck-admin.lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != 0) {
    ::close(fd);
    return;
  }
  for (int i = 0; i < 250; ++i) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return;
    ::usleep(20000);
  }
}

// The lock above serialises one host; two steps whose node 0 differ (srun -w node1 & srun -w node2)
// can still both read the old AdminComment, and the second write drops the first record. So every writer reads
// the comment back after a settling pause (100-250 ms, random, so two writers do not retry in step) and appends
// again while its record is missing, at most k_write_attempts times. A record is lost only when another
// writer's read and write lie further apart than the pause. RPCs: read, write, read back (3); 2 per retry.
constexpr int k_write_attempts = 4;

bool has_record(std::string_view comment, std::string_view record) {
  for (std::size_t at = comment.find(record); at != std::string_view::npos; at = comment.find(record, at + 1)) {
    std::size_t end = at + record.size();
    bool starts = at == 0 || comment.substr(0, at).ends_with(" | ");
    bool ends = end == comment.size() || comment.substr(end).starts_with(" | ");
    if (starts && ends) return true;
  }
  return false;
}

status write_admin_comment(std::uint32_t job, const std::string& record, std::size_t max, int& attempts) {
  lock_node_updates();
  std::string current;
  if (int rc = slurm_api::load_admin_comment(job, current); rc != 0) {
    return status::error(fmt::format("slurm_load_job {}: {}", job, escape_line(slurm_api::error_text(rc), 200)));
  }
  std::minstd_rand rnd(std::random_device{}());
  for (attempts = 1; attempts <= k_write_attempts; ++attempts) {
    if (is_jobstats_summary(current)) {
      return status::error("AdminComment holds jobstats' JS1: summary, left as it is: record not written");
    }
    auto next = append_admin_comment(current, record, max);
    if (!next) return status::error("AdminComment is full with text that is not mrcheck's: record not written");
    if (int rc = slurm_api::set_admin_comment(job, *next); rc != 0) {
      return status::error(fmt::format("slurm_update_job {}: {}", job, escape_line(slurm_api::error_text(rc), 200)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + static_cast<int>(rnd() % 150)));
    if (int rc = slurm_api::load_admin_comment(job, current); rc != 0) {
      return status::error(fmt::format("slurm_load_job {}: {}", job, escape_line(slurm_api::error_text(rc), 200)));
    }
    if (has_record(current, record)) return status::ok();
  }
  return status::error(fmt::format("a concurrent update removed the record {} times", k_write_attempts));
}
#endif

struct own_message {
  std::optional<node_record> record;
  std::string report_json;
  bool began = false;  // the task started checking (k_admin_begin_marker)
  bool done = false;   // "end" or EOF seen
};

void take_pipe_lines(std::string& buf, own_message& m, const collect_args& a) {
  std::size_t nl;
  while (!m.done && (nl = buf.find('\n')) != std::string::npos) {
    std::string line = buf.substr(0, nl);
    buf.erase(0, nl + 1);
    if (line == k_admin_end_marker) {
      m.done = true;
    } else if (line == k_admin_begin_marker && !m.record) {
      m.began = true;
    } else if (!m.record) {
      auto r = decode_node_record(line);
      if (!r) {
        logf("mrcheck: admin: job {} {}: the task's node record is not valid: {}", a.job, step_label(a.step),
             r.error().message());
        m.done = true;
        return;
      }
      // Who and where come from slurmstepd, not from the task.
      r->node_id = a.node_id;
      r->node = a.node;
      m.record = std::move(*r);
    } else if (m.report_json.empty()) {
      m.report_json = std::move(line);
    }
  }
}

void write_report(const collect_args& a, const own_message& m) {
  if (a.report_dir.empty() || !m.record) return;
  nlohmann::json j = nlohmann::json::parse(m.report_json, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("checks")) {
    // The verdicts without the detail: still the report's schema.
    j = nlohmann::json::object();
    report rep;
    for (const auto& c : m.record->checks) rep.checks.push_back({c.id, c.result, c.token, "", ""});
    j = report_to_json(rep);
  }
  // The stack is root's word (the prolog's history), never the task's: whatever the task sent under "stack" goes.
  j.erase("stack");
  if (!a.state_dir.empty() && file_node(a) == a.node) {
    last_stack st = load_last_stack(a.state_dir, a.node, ::geteuid(), read_boot_info(sysroot(), 0).boot_id);
    if (!st.error.empty()) logf("mrcheck: admin: {}", st.error);
    if (st.stack) {
      st.stack->boot_time.reset();  // a time of the prolog's run, not of this report
      j["stack"] = fingerprint_to_json(*st.stack);
    }
  }
  j["slurm"] = {{"job_id", a.job},
                {"step", step_label(a.step)},
                {"node", a.node},
                {"node_id", a.node_id},
                {"nnodes", a.nnodes}};
  auto s = write_node_report(a.report_dir, a.job, step_label(a.step), file_node(a),
                             j.dump(2, ' ', true, nlohmann::json::error_handler_t::replace));
  if (!s) logf("mrcheck: admin: {}", s.message());
}

// What the step's tasks handed in: this node's own message and, on node 0, the other nodes' records.
struct collected {
  own_message own;
  std::vector<node_record> others;
};

// Node 0: accepts one other node's record from the listener and keeps it when it is of a node of the step not yet
// heard from.
void take_other_record(const collect_args& a, admin_listener& listener, const step_nodes& nodes,
                       std::vector<node_record>& others) {
  const std::string step = step_label(a.step);
  auto r = admin_accept_record(listener, a.job, a.step, std::chrono::milliseconds(2000), nodes.addrs, a.auth);
  if (!r) {
    logf("mrcheck: admin: job {} {}: {}", a.job, step, r.error().message());
  } else if (r->node_id == 0 || r->node_id >= a.nnodes ||
             std::any_of(others.begin(), others.end(), [&](const node_record& o) { return o.node_id == r->node_id; })) {
    logf("mrcheck: admin: job {} {}: ignored a record for node index {}", a.job, step, r->node_id);
  } else {
    if (r->node_id < nodes.names.size()) r->node = nodes.names[r->node_id];  // slurmctld's name, not the peer's
    others.push_back(std::move(*r));
  }
}

// Reads this node's record from the record pipe that arrives on fd 3 and, on node 0, the other nodes' records
// from the listener, until all are in or time is up (own: a.own; then a.timeout more; a.timeout at most once
// slurmstepd has gone). "Tasks ended" (or the control socket's close) before any pipe: local task 0 never
// reached task_init's record, as an EOF on the pipe before the begin marker.
collected gather(const collect_args& a, std::optional<admin_listener>& listener, const step_nodes& nodes,
                 clock::time_point start) {
  const std::string step = step_label(a.step);
  const bool node0 = a.node_id == 0;
  collected c;
  own_message& own = c.own;
  std::vector<node_record>& others = c.others;
  std::string buf;
  std::optional<clock::time_point> deadline;  // node 0: own record + report_timeout
  auto own_deadline = start + a.own;
  int record_fd = -1;        // the record pipe, once local task 0 has sent it
  bool control_open = true;  // until the pipe, "tasks ended" or the socket's close
  int invalid = 0;           // messages not of the protocol (logged once)
  bool stepd_gone = false;   // fd 4's reader (slurmstepd) went away: the step was torn down
  for (;;) {
    auto now = clock::now();
    if (own.done && !deadline) deadline = now + a.timeout;
    if (own.done && (!node0 || !listener || others.size() + 1 >= a.nnodes)) break;
    if (deadline && now >= *deadline) break;
    if (!own.done && now >= own_deadline) {
      own.done = true;
      continue;
    }
    auto until = deadline ? *deadline : own_deadline;
    int wait = static_cast<int>(
        std::clamp<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count(), 1, 1 << 30));
    struct pollfd p[4] = {{record_fd, POLLIN, 0},
                          {listener ? listener->fd() : -1, POLLIN, 0},
                          {stepd_gone ? -1 : k_log_fd, 0, 0},
                          {control_open && !own.done ? k_control_fd : -1, POLLIN, 0}};
    int n = ::poll(p, 4, wait);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    if (p[2].revents & (POLLERR | POLLHUP | POLLNVAL)) {
      // slurmstepd is gone (its end of fd 4 closed): at most report_timeout more, whatever we waited for.
      stepd_gone = true;
      auto cap = clock::now() + a.timeout;
      if (!deadline || *deadline > cap) deadline = cap;
      if (own_deadline > cap) own_deadline = cap;
    }
    if (p[3].revents) {
      admin_control_message m = admin_read_control(k_control_fd);
      using kind = admin_control_message::kind;
      if (m.what == kind::record_pipe) {
        record_fd = m.fd;
        control_open = false;
      } else if (m.what == kind::tasks_ended || m.what == kind::closed) {
        control_open = false;
        own.done = true;
      } else if (m.what == kind::invalid && invalid++ == 0) {
        logf("mrcheck: admin: job {} {}: control socket: {}: ignored", a.job, step, m.problem);
      }
    }
    if (record_fd >= 0 && p[0].revents) {
      char chunk[8192];
      ssize_t r = ::read(record_fd, chunk, sizeof chunk);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        ::close(record_fd);
        record_fd = -1;
        own.done = true;
      } else if (buf.size() < k_pipe_max) {
        buf.append(chunk, static_cast<std::size_t>(r));
        take_pipe_lines(buf, own, a);
      }
    }
    if (listener && (p[1].revents & POLLIN)) take_other_record(a, *listener, nodes, others);
  }
  if (record_fd >= 0) ::close(record_fd);
  return c;
}

// Not node 0: hand this node's record to node 0. Returns the exit code.
int hand_in(const collect_args& a, const own_message& own) {
  const std::string step = step_label(a.step);
  if (!own.record) return 0;  // this node did not check the step: nothing to hand in
  step_nodes nodes = load_step_nodes(a);
  if (nodes.addrs.empty()) {
    logf("mrcheck: admin: job {} {}: cannot reach node 0 without the step's node list: record not handed in", a.job,
         step);
    return 1;
  }
  std::vector<std::string> refused;
  auto s = admin_send_record(nodes.addrs.front(), nodes.addrs[a.node_id], a.job, a.step, *own.record,
                             clock::now() + a.timeout, a.auth, refused);
  for (const auto& line : refused) logf("mrcheck: admin: job {} {}: {}", a.job, step, line);
  if (!s) logf("mrcheck: admin: job {} {}: {}", a.job, step, s.message());
  return s ? 0 : 1;
}

// Node 0: the step's record of every node into the job's AdminComment. Returns the exit code.
int write_step_record(const collect_args& a, collected& c, [[maybe_unused]] const step_nodes& nodes) {
  const std::string step = step_label(a.step);
  const own_message& own = c.own;
  // Not checked here; or checked, but the task ended before its record (cancelled, killed): then a record says so.
  bool cancelled = !own.record && own.began;
  if (!own.record && c.others.empty() && !cancelled) return 0;
  std::vector<node_record> all = std::move(c.others);
  if (own.record) all.push_back(*own.record);
  // A step of one node reads no layout (no listener): its one node is this one, as slurmstepd names it. A
  // cancelled step's record names it then, not "node index 0" (tests/container/container_test.sh).
  std::vector<std::string> names = nodes.names;
  if (names.empty() && a.nnodes == 1 && !a.node.empty()) names.push_back(a.node);
#ifdef MRCHECK_HAVE_SLURM
  slurm_api::init();
  std::string record = format_step_record(step, a.nnodes, all, names, cancelled);
  int attempts = 0;
  auto s = write_admin_comment(a.job, record, a.max, attempts);
  if (!s) {
    logf("mrcheck: admin: job {} {}: AdminComment not written: {}", a.job, step, s.message());
    return 1;
  }
  if (attempts > 1) {
    logi("mrcheck: admin: job {} {}: AdminComment: {} (written {} times: a concurrent step's update removed it)", a.job,
         step, record, attempts);
  } else {
    logi("mrcheck: admin: job {} {}: AdminComment: {}", a.job, step, record);
  }
  return 0;
#else
  logf("mrcheck: admin: job {} {}: built without libslurm, AdminComment not written", a.job, step);
  return 1;
#endif
}

int collect(const collect_args& a) {
  auto start = clock::now();
  std::optional<admin_listener> listener;
  bool node0 = a.node_id == 0;
  if (a.admin_comment && node0 && a.nnodes > 1) {
    auto l = admin_listener::open(a.job, a.step);
    if (l) {
      listener.emplace(std::move(*l));
    } else {
      logf("mrcheck: admin: job {} {}: {}", a.job, step_label(a.step), l.error().message());
    }
  }
  // Node 0 of several: the step's nodes first, to know each peer (while they connect, the listener queues them).
  step_nodes nodes;
  if (listener) nodes = load_step_nodes(a);
  collected c = gather(a, listener, nodes, start);
  ::close(k_control_fd);
  write_report(a, c.own);
  if (!a.admin_comment) return 0;
  return node0 ? write_step_record(a, c, nodes) : hand_in(a, c.own);
}

}  // namespace

int admin_collect_main(int argc, char** argv) {
  ::fcntl(k_log_fd, F_SETFL, ::fcntl(k_log_fd, F_GETFL) | O_NONBLOCK);
  auto a = parse(argc, argv);
  if (!a) return 2;
  a->auth = munge_settings_from_slurm_conf();  // our environment is slurmstepd's, never the job's
  // Detach (admin_protocol.h): the first process exits, its child goes on outside slurmstepd's process tree, in
  // the same process group. Without a fork, it goes on in place.
  if (pid_t child = ::fork(); child > 0) {
    ::_exit(0);
  }
  // The bound of the whole run, libslurm's own retries included (default SIGALRM action: terminate).
  auto total = a->own + a->timeout * 2 + std::chrono::seconds(10);
  ::signal(SIGALRM, SIG_DFL);
  ::alarm(static_cast<unsigned>(std::chrono::duration_cast<std::chrono::seconds>(total).count()));
  ::signal(SIGPIPE, SIG_IGN);
  return collect(*a);
}

}  // namespace mrcheck::prolog
