// README.md's configuration table is written by hand; config_keys() is what the parser accepts and what the
// man pages are generated from. This keeps the README from drifting: every key the code accepts has a row,
// and every row names a key the code accepts.
#include <mrcheck/config.h>

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace {

std::string readme_config_section() {
  std::ifstream in(std::string(MRCHECK_FIXTURES_DIR) + "/../../README.md");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string all = ss.str();
  auto begin = all.find("\n## Configuration");
  if (begin == std::string::npos) return {};
  auto end = all.find("\n## ", begin + 1);
  return all.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

TEST(readme_config_keys, table_lists_exactly_the_accepted_keys) {
  std::string section = readme_config_section();
  ASSERT_FALSE(section.empty()) << "README.md has no '## Configuration' section";
  std::set<std::string> rows;
  std::regex row(R"(\n\| `([a-z_]+)` \|)");
  for (auto it = std::sregex_iterator(section.begin(), section.end(), row); it != std::sregex_iterator(); ++it) {
    rows.insert((*it)[1].str());
  }
  std::set<std::string> keys;
  for (const auto& k : mrcheck::config_keys()) keys.insert(std::string(k.key));
  for (const auto& k : keys) EXPECT_TRUE(rows.count(k)) << "README.md's configuration table lacks `" << k << "`";
  for (const auto& r : rows)
    EXPECT_TRUE(keys.count(r)) << "README.md's configuration table lists `" << r << "`, which the parser refuses";
}

}  // namespace
