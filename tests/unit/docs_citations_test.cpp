// The repository explains itself: every comment that cites an outside fact cites a file in
// docs/facts/ and a section that exists there, and nothing cites a notes file that is not in the repository.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

fs::path repo_root() { return fs::path(MRCHECK_FIXTURES_DIR).parent_path().parent_path(); }

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The repository's own text files: sources, build files, scripts, docs. Not build trees, not the fuzz corpora
// (inputs the fuzzer mutated, not prose).
std::vector<fs::path> text_files() {
  static const std::set<std::string> exts = {".cpp", ".h",  ".c",  ".in",  ".txt", ".cmake",
                                             ".md",  ".sh", ".py", ".map", ".conf"};
  std::vector<fs::path> out;
  fs::path root = repo_root();
  for (const char* top : {"src", "include", "cli", "prolog", "spank", "etc", "tests", "bench", "docs", "man", "scripts",
                          "packaging", "cmake"}) {
    if (!fs::is_directory(root / top)) continue;
    for (auto it = fs::recursive_directory_iterator(root / top); it != fs::recursive_directory_iterator(); ++it) {
      const auto& p = it->path();
      if (it->is_directory() && (p.filename() == "corpus" || p.filename().string().starts_with("build"))) {
        it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file() && exts.count(p.extension().string())) out.push_back(p);
    }
  }
  for (const char* f : {"CMakeLists.txt", "README.md", "SECURITY.md"}) {
    if (fs::exists(root / f)) out.push_back(root / f);
  }
  return out;
}

// The section numbers ("## 3. ...") of a docs/facts file.
std::set<int> sections(const fs::path& file) {
  std::set<int> out;
  static const std::regex heading(R"(^## (\d+)\.)", std::regex::multiline);
  std::string text = read(file);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), heading); it != std::sregex_iterator(); ++it) {
    out.insert(std::stoi((*it)[1]));
  }
  return out;
}

TEST(DocsCitations, EveryFactsCitationNamesAnExistingFileAndSection) {
  auto files = text_files();
  ASSERT_GT(files.size(), 100u) << "the walk found too few files under " << repo_root();
  // "docs/facts/memlock.md §1", "facts/slurm-spank.md §3-§5", "docs/facts/verbs-and-nccl.md §2, §4".
  // std::regex is slow: it only looks at a short window after each "facts/".
  static const std::regex cite(R"(^facts/([a-z0-9-]+)\.md((?:,? ?§\d+(?:-§\d+)?)*))");
  static const std::regex num(R"(§(\d+))");
  int citations = 0;
  for (const auto& f : files) {
    std::string text = read(f);
    for (std::size_t at = text.find("facts/"); at != std::string::npos; at = text.find("facts/", at + 1)) {
      std::string window = text.substr(at, 120);
      std::smatch m;
      if (!std::regex_search(window, m, cite)) continue;
      fs::path target = repo_root() / "docs" / "facts" / (m[1].str() + ".md");
      ASSERT_TRUE(fs::exists(target)) << f << " cites " << m[0] << ": no such file";
      std::set<int> have = sections(target);
      std::string secs = m[2];
      for (auto n = std::sregex_iterator(secs.begin(), secs.end(), num); n != std::sregex_iterator(); ++n) {
        EXPECT_TRUE(have.count(std::stoi((*n)[1]))) << f << " cites " << m[0] << ": no section " << (*n)[0];
      }
      ++citations;
    }
  }
  EXPECT_GT(citations, 40);
}

TEST(DocsCitations, NothingCitesANotesFileOutsideTheRepository) {
  // Written in two pieces so this file does not match itself.
  const std::string notes = std::string("facts") + ".md";
  const std::string shared = std::string("shared/") + "reference";
  for (const auto& f : text_files()) {
    std::string text = read(f);
    for (std::size_t at = text.find(notes); at != std::string::npos; at = text.find(notes, at + 1)) {
      char before = at == 0 ? ' ' : text[at - 1];
      EXPECT_TRUE(before == '/' || before == '-' || std::isalnum(static_cast<unsigned char>(before)))
          << f << " cites " << notes << " at byte " << at << ", which is not in the repository";
    }
    EXPECT_EQ(text.find(shared), std::string::npos) << f << " cites " << shared;
    for (const char* other : {"field", "field-2026-12", "house-style", "model-codebases"}) {
      std::string name = std::string(other) + ".md";
      EXPECT_EQ(text.find(name), std::string::npos) << f << " cites " << name << ", which is not in the repository";
    }
  }
}

TEST(DocsCitations, DesignAndFactsAreLinkedFromTheReadme) {
  std::string readme = read(repo_root() / "README.md");
  EXPECT_NE(readme.find("docs/DESIGN.md"), std::string::npos);
  EXPECT_NE(readme.find("docs/facts/"), std::string::npos);
  for (const auto& e : fs::directory_iterator(repo_root() / "docs" / "facts")) {
    if (e.path().filename() == "README.md") continue;
    EXPECT_NE(read(repo_root() / "docs" / "facts" / "README.md").find(e.path().filename().string()), std::string::npos)
        << e.path() << " is not listed in docs/facts/README.md";
  }
}

}  // namespace
