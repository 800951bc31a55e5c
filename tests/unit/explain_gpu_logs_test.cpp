// Real NCCL and torch logs from a GPU machine (tests/fixtures/nccl_logs/gpu_h100, README.md there: each log's first
// line is its command): `mrcheck explain`'s one call (include/mrcheck/explain.h) must give the exit status and the
// causes EXPECT lists, healthy runs at every NCCL_DEBUG level with no finding. The node facts are a --root tree
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

const std::filesystem::path k_dir = std::filesystem::path(MRCHECK_FIXTURES_DIR) / "nccl_logs" / "gpu_h100";

struct expect_row {
  std::string file;
  int exit = 0;
  std::set<std::string> causes;
};

std::vector<expect_row> read_expect() {
  std::vector<expect_row> rows;
  std::ifstream in(k_dir / "EXPECT");
  EXPECT_TRUE(in.good());
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream cols(line);
    expect_row r;
    std::string causes;
    cols >> r.file >> r.exit >> causes;
    std::istringstream list(causes);
    for (std::string c; std::getline(list, c, ',');) {
      if (c != "none") r.causes.insert(c);
    }
    rows.push_back(r);
  }
  return rows;
}

TEST(explain_gpu_logs, every_real_log_gives_its_exit_status_and_causes) {
  auto root = sysroot::open(std::string(MRCHECK_FIXTURES_DIR) + "/gpu_h200");
  ASSERT_TRUE(root.is_ok());
  std::vector<expect_row> rows = read_expect();
  ASSERT_GE(rows.size(), 20u);
  int right = 0;
  for (const expect_row& r : rows) {
    SCOPED_TRACE(r.file);
    int fd = ::open((k_dir / r.file).c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    explain_options opts;
    opts.source = r.file;
    explain_report report;
    ASSERT_TRUE(explain_log(fd, *root, opts, report).is_ok());
    ::close(fd);
    std::set<std::string> got;
    for (const finding& f : report.findings) got.insert(std::string(to_string(f.diag.what)));
    const int exit = report.findings.empty() ? 0 : 1;
    EXPECT_EQ(exit, r.exit);
    EXPECT_EQ(got, r.causes);
    if (exit == r.exit && got == r.causes) ++right;
    // The text and the JSON are made for every log (the JSON carries its schema version).
    EXPECT_FALSE(explain_text(report).empty());
    EXPECT_EQ(explain_json(report).at("findings").size(), report.findings.size());
  }
  std::cout << "real GPU logs: " << right << "/" << rows.size() << " right\n";
}

TEST(explain_gpu_logs, every_log_names_its_command) {
  for (const expect_row& r : read_expect()) {
    std::ifstream in(k_dir / r.file);
    std::string first;
    std::getline(in, first);
    EXPECT_TRUE(first.starts_with("# command: ")) << r.file;
  }
}

}  // namespace
}  // namespace mrcheck
