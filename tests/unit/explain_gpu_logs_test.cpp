// Real logs of real programs: NCCL and torch on a GPU machine (tests/fixtures/nccl_logs/gpu_h100, README.md there:
// each log's first line is its command) and perftest, rdma-core, libfabric, UCX and Open MPI on Soft-RoCE guests
// (tests/fixtures/guest_logs, COMMANDS there): `mrcheck explain`'s one call (include/mrcheck/explain.h) must give
// the exit status and the causes EXPECT lists, healthy runs at every NCCL_DEBUG level with no finding. The node facts are a --root tree
// (tests/fixtures/gpu_h200, a GPU node without HCA) so that the answer does not depend on the machine running it.
#include <mrcheck/explain.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>

namespace mrcheck {
namespace {

const std::filesystem::path k_gpu = std::filesystem::path(MRCHECK_FIXTURES_DIR) / "nccl_logs" / "gpu_h100";
const std::filesystem::path k_guest = std::filesystem::path(MRCHECK_FIXTURES_DIR) / "guest_logs";

struct expect_row {
  std::string file;
  int exit = 0;
  std::set<std::string> causes;
  bool miss = false;  // a known miss: the exit status is asserted, the causes counted wrong
};

std::vector<expect_row> read_expect(const std::filesystem::path& dir) {
  std::vector<expect_row> rows;
  std::ifstream in(dir / "EXPECT");
  EXPECT_TRUE(in.good());
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream cols(line);
    expect_row r;
    std::string causes;
    std::string flag;
    cols >> r.file >> r.exit >> causes >> flag;
    r.miss = flag == "miss";
    std::istringstream list(causes);
    for (std::string c; std::getline(list, c, ',');) {
      if (c != "none") r.causes.insert(c);
    }
    rows.push_back(r);
  }
  return rows;
}

// Scores one directory; returns how many logs were right (exit status and causes).
int score_dir(const std::filesystem::path& dir, std::size_t at_least) {
  auto root = sysroot::open(std::string(MRCHECK_FIXTURES_DIR) + "/gpu_h200");
  EXPECT_TRUE(root.is_ok());
  if (!root.is_ok()) return 0;
  std::vector<expect_row> rows = read_expect(dir);
  EXPECT_GE(rows.size(), at_least);
  int right = 0;
  for (const expect_row& r : rows) {
    SCOPED_TRACE(r.file);
    int fd = ::open((dir / r.file).c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd, 0);
    if (fd < 0) continue;
    explain_options opts;
    opts.source = r.file;
    explain_report report;
    EXPECT_TRUE(explain_log(fd, *root, opts, report).is_ok());
    ::close(fd);
    std::set<std::string> got;
    for (const finding& f : report.findings) got.insert(std::string(to_string(f.diag.what)));
    const int exit = report.findings.empty() ? 0 : 1;
    EXPECT_EQ(exit, r.exit);
    if (!r.miss) {
      EXPECT_EQ(got, r.causes);
    }
    if (exit == r.exit && got == r.causes) ++right;
    // The text and the JSON are made for every log (the JSON carries its schema version).
    EXPECT_FALSE(explain_text(report).empty());
    EXPECT_EQ(explain_json(report).at("findings").size(), report.findings.size());
  }
  std::cout << dir.filename().string() << ": " << right << "/" << rows.size() << " right\n";
  return right;
}

TEST(explain_gpu_logs, every_real_log_gives_its_exit_status_and_causes) { score_dir(k_gpu, 20); }

TEST(explain_gpu_logs, every_real_guest_log_gives_its_exit_status) { score_dir(k_guest, 16); }

TEST(explain_gpu_logs, every_log_names_its_command) {
  for (const expect_row& r : read_expect(k_gpu)) {
    std::ifstream in(k_gpu / r.file);
    std::string first;
    std::getline(in, first);
    EXPECT_TRUE(first.starts_with("# command: ")) << r.file;
  }
}

}  // namespace
}  // namespace mrcheck
