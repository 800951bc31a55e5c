// mrcheck-prolog's Prometheus textfile: the exposition text (HELP/TYPE, one gauge per check, escaped label
// values) and the atomic, symlink-refusing write.
#include "prolog/textfile.h"

#include <mrcheck/facts.h>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace mrcheck {
namespace {

namespace fs = std::filesystem;

check_result result(std::string id, verdict v) {
  check_result c;
  c.id = std::move(id);
  c.result = v;
  c.summary = "whatever";
  return c;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/mrcheck-textfile-test.XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    EXPECT_NE(d, nullptr);
    path_ = d ? d : "/nonexistent";
    if (d) ::chmod(d, 0755);  // as node_exporter's textfile directory: others may read it
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

TEST(PrometheusText, LabelValuesAreEscaped) {
  EXPECT_EQ(prometheus_label_value("memlock"), "memlock");
  EXPECT_EQ(prometheus_label_value("a\\b"), "a\\\\b");
  EXPECT_EQ(prometheus_label_value("say \"hi\""), "say \\\"hi\\\"");
  EXPECT_EQ(prometheus_label_value("two\nlines"), "two\\nlines");
  EXPECT_EQ(prometheus_label_value("\\\"\n"), "\\\\\\\"\\n");
  EXPECT_EQ(prometheus_label_value(""), "");
}

TEST(PrometheusText, StatusValues) {
  EXPECT_EQ(prometheus_status_value(verdict::skip), -1);
  EXPECT_EQ(prometheus_status_value(verdict::pass), 0);
  EXPECT_EQ(prometheus_status_value(verdict::warn), 1);
  EXPECT_EQ(prometheus_status_value(verdict::fail), 2);
  EXPECT_EQ(prometheus_status_value(verdict::error), 3);
}

TEST(PrometheusText, OneGaugePerCheckWithHelpAndType) {
  report r;
  r.checks = {result("rdma_stack", verdict::pass), result("hca_fw", verdict::skip), result("bar1", verdict::warn),
              result("hugepages", verdict::fail), result("odd\"id\n", verdict::error)};
  std::string text = prometheus_textfile(r, 1764400000);
  EXPECT_EQ(text,
            "# HELP mrcheck_check_status Verdict of each mrcheck-prolog check in its last run: -1 skip (not "
            "applicable), 0 pass, 1 warn, 2 fail, 3 error (the checker itself broke).\n"
            "# TYPE mrcheck_check_status gauge\n"
            "mrcheck_check_status{check=\"rdma_stack\"} 0\n"
            "mrcheck_check_status{check=\"hca_fw\"} -1\n"
            "mrcheck_check_status{check=\"bar1\"} 1\n"
            "mrcheck_check_status{check=\"hugepages\"} 2\n"
            "mrcheck_check_status{check=\"odd\\\"id\\n\"} 3\n"
            "# HELP mrcheck_status Worst verdict of mrcheck-prolog's last run (skips ignored): 0 pass, 1 warn, 2 "
            "fail, 3 error.\n"
            "# TYPE mrcheck_status gauge\n"
            "mrcheck_status 2\n"
            "# HELP mrcheck_last_run_timestamp_seconds Unix time of mrcheck-prolog's last run.\n"
            "# TYPE mrcheck_last_run_timestamp_seconds gauge\n"
            "mrcheck_last_run_timestamp_seconds 1764400000\n");
  // Every sample line is "name{labels} value" or "name value" and stays on one line.
  std::istringstream lines(text);
  std::string line;
  int samples = 0;
  while (std::getline(lines, line)) {
    if (line.starts_with("#")) continue;
    ++samples;
    EXPECT_TRUE(line.starts_with("mrcheck_")) << line;
  }
  EXPECT_EQ(samples, 7);

  report passing;
  passing.checks = {result("nccl", verdict::pass), result("bar1", verdict::skip)};
  EXPECT_NE(prometheus_textfile(passing, 1).find("\nmrcheck_status 0\n"), std::string::npos);
}

TEST(PrometheusTextfile, WritesAndReplacesAtomically) {
  TempDir d;
  std::string path = (d.path() / "mrcheck.prom").string();
  mode_t old = ::umask(077);  // node_exporter runs as its own user: the file is 0644 whatever the umask
  ASSERT_TRUE(write_textfile(path, "first\n", 0).is_ok());
  ::umask(old);
  EXPECT_EQ(slurp(path), "first\n");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  // A reader holding the old file keeps reading the old content: the name was replaced, not the bytes.
  int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  auto s = write_textfile(path, "second\n", 0);
  ASSERT_TRUE(s.is_ok()) << s.message();
  char buf[16] = {};
  ASSERT_EQ(::read(fd, buf, sizeof buf - 1), 6);
  EXPECT_STREQ(buf, "first\n");
  ::close(fd);
  EXPECT_EQ(slurp(path), "second\n");
  // No temporary left behind.
  int files = 0;
  for (const auto& e : fs::directory_iterator(d.path())) {
    ++files;
    EXPECT_EQ(e.path().filename(), "mrcheck.prom");
  }
  EXPECT_EQ(files, 1);
}

TEST(PrometheusTextfile, RefusesSymlinksAndOddTargets) {
  TempDir d;
  fs::path victim = d.path() / "victim";
  { std::ofstream(victim) << "precious\n"; }
  fs::path link = d.path() / "link.prom";
  fs::create_symlink(victim, link);
  auto s = write_textfile(link.string(), "evil\n", 0);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("is a symlink: refused"), std::string::npos) << s.message();
  EXPECT_EQ(slurp(victim), "precious\n");
  EXPECT_TRUE(fs::is_symlink(link));

  // A dangling symlink too (it would otherwise be created through).
  fs::path dangling = d.path() / "dangling.prom";
  fs::create_symlink(d.path() / "nothing-here", dangling);
  EXPECT_FALSE(write_textfile(dangling.string(), "x\n", 0).is_ok());
  EXPECT_FALSE(fs::exists(d.path() / "nothing-here"));

  // A planted temporary (the name the writer will use) is not followed either.
  fs::path target = d.path() / "planted.prom";
  fs::create_symlink(victim, target.string() + "." + std::to_string(::getpid()) + ".tmp");
  s = write_textfile(target.string(), "evil\n", 0);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("File exists"), std::string::npos) << s.message();
  EXPECT_EQ(slurp(victim), "precious\n");

  fs::create_directory(d.path() / "dir.prom");
  s = write_textfile((d.path() / "dir.prom").string(), "x\n", 0);
  EXPECT_NE(s.message().find("not a regular file"), std::string::npos) << s.message();
  s = write_textfile("relative/mrcheck.prom", "x\n", 0);
  EXPECT_NE(s.message().find("not an absolute path"), std::string::npos) << s.message();
  s = write_textfile((d.path() / "missing" / "mrcheck.prom").string(), "x\n", 0);
  EXPECT_NE(s.message().find("No such file or directory"), std::string::npos) << s.message();
  s = write_textfile(d.path().string() + "/", "x\n", 0);
  EXPECT_FALSE(s.is_ok());
}

TEST(PrometheusTextfile, RootRefusesADirectoryOthersCanWrite) {
  TempDir d;
  fs::path open_dir = d.path() / "open";
  fs::create_directory(open_dir);
  ASSERT_EQ(::chmod(open_dir.c_str(), 0777), 0);
  std::string path = (open_dir / "mrcheck.prom").string();
  auto s = write_textfile(path, "x\n", 0);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("writable by group or others (mode 777)"), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists(path));
  // Not root: the directory's permissions are the owner's business.
  EXPECT_TRUE(write_textfile(path, "x\n", 1000).is_ok());
  // Root-owned and sticky (like /tmp) is refused too: a user can create the name first there, and the
  // metrics would never be written again.
  if (::geteuid() == 0) {
    ASSERT_EQ(::chmod(open_dir.c_str(), 01777), 0);
    fs::remove(path);
    s = write_textfile(path, "y\n", 0);
    EXPECT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("so a user could create the file's name first"), std::string::npos) << s.message();
    EXPECT_FALSE(fs::exists(path));
    // A directory of another owner, even 0755, is refused for the same reason.
    ASSERT_EQ(::chmod(open_dir.c_str(), 0755), 0);
    ASSERT_EQ(::chown(open_dir.c_str(), 1000, 1000), 0);
    s = write_textfile(path, "y\n", 0);
    EXPECT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("belongs to uid 1000"), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace mrcheck

namespace mrcheck {
namespace {

// docs/prometheus.md: the state enum, build and run info, per-device series with node_exporter's and
// DCGM-exporter's label names.
TEST(PrometheusText, StatesInfoAndDevices) {
  report r;
  r.checks = {result("hca_fw", verdict::fail)};
  node_facts f;
  rdma_device_fact d;
  d.name = "mlx5_0";
  d.fw_ver = "28.33.0800";
  d.board_id = "MT_0000000838";
  d.hca_type = "MT4129";
  d.driver = "mlx5_core";
  rdma_port_fact p;
  p.number = 1;
  p.state = "4: ACTIVE";
  p.phys_state = "5: LinkUp";
  p.link_layer = "InfiniBand";
  p.rate = "400 Gb/sec (4X NDR)";
  d.ports.push_back(p);
  f.rdma_devices = std::vector<rdma_device_fact>{d};
  gpu_fact g;
  g.pci_bdf = "0000:3b:00.0";
  f.gpus = std::vector<gpu_fact>{g};
  textfile_input in{1764400000, "gpu01", "prolog", "4242", &f, {"GPU-8c1f"}};
  std::string t = prometheus_textfile(r, in);
  for (const char* want : {
           "mrcheck_check_status{check=\"hca_fw\"} 2\n",
           "mrcheck_check_state{check=\"hca_fw\",state=\"fail\"} 1\n",
           "mrcheck_check_state{check=\"hca_fw\",state=\"pass\"} 0\n",
           "mrcheck_run_info{mode=\"prolog\",node=\"gpu01\",hpc_job=\"4242\"} 1\n",
           "mrcheck_rdma_device_info{device=\"mlx5_0\",firmware_version=\"28.33.0800\",board_id=\"MT_0000000838\","
           "hca_type=\"MT4129\",driver=\"mlx5_core\",family=\"mlx5\"} 1\n",
           "mrcheck_rdma_port_info{device=\"mlx5_0\",port=\"1\",state=\"ACTIVE\",phys_state=\"LinkUp\","
           "link_layer=\"InfiniBand\",rate=\"400 Gb/sec (4X NDR)\"} 1\n",
           "mrcheck_gpu_info{gpu=\"0\",UUID=\"GPU-8c1f\",pci_bus_id=\"00000000:3B:00.0\"} 1\n",
           "# TYPE mrcheck_build_info gauge\nmrcheck_build_info{version=\"",
       }) {
    EXPECT_NE(t.find(want), std::string::npos) << want << "\n" << t;
  }
  // A healthcheck run has no job: no hpc_job label at all.
  textfile_input hc{1, "gpu01", "healthcheck", "", nullptr, {}};
  EXPECT_NE(prometheus_textfile(r, hc).find("mrcheck_run_info{mode=\"healthcheck\",node=\"gpu01\"} 1\n"),
            std::string::npos);
}

TEST(PrometheusTextfile, ADirectoryOthersCannotReadIsOneLine) {
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0700), 0);
  std::string path = (dir.path() / "mrcheck.prom").string();
  status s = write_textfile(path, "x 1\n", ::geteuid());
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("cannot read it"), std::string::npos) << s.message();
  EXPECT_EQ(slurp(path), "x 1\n");  // written all the same: a site may run node_exporter as root
}

}  // namespace
}  // namespace mrcheck
