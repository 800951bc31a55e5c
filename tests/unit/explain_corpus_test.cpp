// Runs the scanner and the shared diagnosis over the corpus of real NCCL log excerpts (tests/corpus/nccl_logs,
// listed with their expected causes in MANIFEST) and checks that every excerpt names its public source.
#include <mrcheck/explain.h>
#include <mrcheck/nccl_log.h>
#include <mrcheck/units.h>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace mrcheck {
namespace {

const std::filesystem::path k_corpus = std::filesystem::path(MRCHECK_FIXTURES_DIR) / ".." / "corpus" / "nccl_logs";

struct manifest_row {
  std::string file;
  std::string evidence;
  std::string causes;
  std::string transport;
  std::string flag;  // "miss": a known miss, scored, not asserted
  int line = 0;
};

std::vector<manifest_row> read_manifest(const std::filesystem::path& dir = k_corpus) {
  std::vector<manifest_row> rows;
  std::ifstream in(dir / "MANIFEST");
  EXPECT_TRUE(in.good()) << "cannot read " << (dir / "MANIFEST");
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream cols(line);
    manifest_row r;
    r.line = n;
    cols >> r.file >> r.evidence >> r.causes >> r.transport >> r.flag;
    EXPECT_FALSE(r.transport.empty()) << "MANIFEST:" << n << " needs four columns";
    rows.push_back(r);
  }
  return rows;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  return out;
}

// Scans an excerpt the way `mrcheck explain` reads a file (scan_fd), without its header: the leading "# source:" /
// "# excerpt:" lines are the corpus's notes about the log, not part of it.
void scan_excerpt(const std::filesystem::path& path, nccl_log_scanner& scanner) {
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << path;
  std::string line;
  std::string body;
  bool header = true;
  while (std::getline(in, line)) {
    if (header && line.starts_with("# ")) continue;
    header = false;
    body += line + "\n";
  }
  int fd = ::memfd_create("excerpt", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, body.data(), body.size()), static_cast<ssize_t>(body.size()));
  ASSERT_EQ(::lseek(fd, 0, SEEK_SET), 0);
  ASSERT_TRUE(scan_fd(fd, scanner).is_ok());
  ::close(fd);
}

node_evidence evidence_from_spec(const std::string& spec) {
  node_evidence e;
  if (spec == "-") return e;
  for (const std::string& kv : split(spec, ',')) {
    auto eq = kv.find('=');
    EXPECT_NE(eq, std::string::npos) << kv;
    std::string k = kv.substr(0, eq);
    std::string v = kv.substr(eq + 1);
    const bool yes = v == "yes";
    if (k == "memlock_soft") {
      auto b = parse_bytes(v);
      EXPECT_TRUE(b.is_ok()) << kv;
      if (b) e.memlock_soft = *b;
    } else if (k == "in_container") {
      e.in_container = yes;
    } else if (k == "cap_ipc_lock") {
      e.cap_ipc_lock = yes;
    } else if (k == "kernel") {
      e.kernel_stack = v == "ofed" ? rdma_flavour::ofed : rdma_flavour::inbox;
    } else if (k == "user") {
      e.user_stack = v == "ofed" ? rdma_flavour::ofed : rdma_flavour::inbox;
    } else if (k == "peer_memory") {
      e.peer_memory = yes;
    } else if (k == "driver") {
      e.driver_flavour = v == "open" ? nvidia_flavour::open : nvidia_flavour::proprietary;
    } else if (k == "dmabuf_mr") {
      e.has_dmabuf_mr = yes;
    } else if (k == "cma_total" || k == "cma_free") {
      auto b = parse_bytes(v);
      EXPECT_TRUE(b.is_ok()) << kv;
      if (b) (k == "cma_total" ? e.cma_total : e.cma_free) = *b;
    } else {
      ADD_FAILURE() << "unknown evidence key " << k;
    }
  }
  return e;
}

TEST(explain_corpus, every_manifest_row_gives_the_expected_causes) {
  std::vector<manifest_row> rows = read_manifest();
  ASSERT_GE(rows.size(), 25u);
  std::map<std::string, std::pair<int, int>> score;  // transport -> (rows right, rows)
  for (const manifest_row& r : rows) {
    SCOPED_TRACE("MANIFEST:" + std::to_string(r.line) + " " + r.file);
    nccl_log_scanner scanner;
    scan_excerpt(k_corpus / r.file, scanner);
    evidence_origin origin;
    origin.from_root = true;  // the evidence is the row's, not this machine's
    std::vector<finding> findings = explain_groups(scanner, evidence_from_spec(r.evidence), origin);
    std::vector<std::string> got;
    for (const finding& f : findings) {
      got.emplace_back(to_string(f.diag.what));
      EXPECT_FALSE(f.diag.summary.empty());
      EXPECT_FALSE(f.diag.fix.empty());
      EXPECT_EQ(f.diag.fix.find('\n'), std::string::npos) << "the fix is one line";
    }
    std::vector<std::string> want = r.causes == "none" ? std::vector<std::string>{} : split(r.causes, ',');
    if (r.flag != "miss") {
      EXPECT_EQ(got, want);
    }
    if (got != want && r.flag != "miss") {
      for (const finding& f : findings) {
        std::cout << "  got " << to_string(f.diag.what) << " for '" << f.group.example << "'\n";
      }
    }
    auto& [right, total] = score[r.transport];
    ++total;
    if (got == want) ++right;
  }
  // The per-transport score, for the record (to compare before and after a change to the scanner).
  std::string line = "corpus score:";
  int right_all = 0;
  int total_all = 0;
  for (const auto& [transport, s] : score) {
    line += " " + transport + " " + std::to_string(s.first) + "/" + std::to_string(s.second);
    right_all += s.first;
    total_all += s.second;
  }
  std::cout << line << ", all " << right_all << "/" << total_all << "\n";
}

TEST(explain_corpus, every_excerpt_names_its_source_and_is_listed) {
  std::set<std::string> listed;
  for (const manifest_row& r : read_manifest()) listed.insert(r.file);
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(k_corpus)) {
    if (entry.path().extension() != ".log") continue;
    ++files;
    const std::string name = entry.path().filename().string();
    EXPECT_TRUE(listed.count(name)) << name << " is not in MANIFEST";
    std::ifstream in(entry.path());
    std::string first;
    std::getline(in, first);
    EXPECT_TRUE(first.starts_with("# source: https://") || first.starts_with("# source: captured on "))
        << name << ": first line must be '# source: <URL>' or '# source: captured on <machine>'";
  }
  EXPECT_EQ(static_cast<std::size_t>(files), listed.size());
}

TEST(explain_corpus, selected_details_survive_real_formats) {
  auto scan = [](const char* file) {
    nccl_log_scanner s;
    int fd = ::open((k_corpus / file).c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd, 0);
    EXPECT_TRUE(scan_fd(fd, s).is_ok());
    ::close(fd);
    return s;
  };
  {
    nccl_log_scanner s = scan("horovod_3929_duplicate_gpu_ompi.log");
    auto g = s.groups();
    ASSERT_EQ(g.size(), 1u);
    EXPECT_EQ(g[0]->ranks, (std::set<int>{0, 2, 4}));
    EXPECT_EQ(g[0]->hosts, (std::set<std::string>{"smc-gpu-03"}));
  }
  {
    nccl_log_scanner s = scan("deepep_143_create_cq_interleaved.log");
    auto g = s.groups();
    ASSERT_EQ(g.size(), 1u);
    EXPECT_EQ(g[0]->count, 2u);
    EXPECT_EQ(g[0]->processes.size(), 2u);
  }
  {
    nccl_log_scanner s = scan("horovod_1651_create_qp_old.log");
    auto g = s.groups();
    ASSERT_EQ(g.size(), 1u);
    EXPECT_EQ(g[0]->consequences, 1u);  // the TensorFlow "unhandled system error" line
  }
  {
    nccl_log_scanner s = scan("nccl_563_ofi_register_pdsh.log");
    auto g = s.groups();
    ASSERT_EQ(g.size(), 1u);
    EXPECT_EQ(g[0]->what.err, 12);
    EXPECT_EQ(g[0]->hosts, (std::set<std::string>{"ip-10-0-87-143"}));
  }
}

}  // namespace
}  // namespace mrcheck
