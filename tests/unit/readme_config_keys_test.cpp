// README.md's configuration table and etc/mrcheck.conf are written by hand; config_keys() (src/config/config.cpp)
// is what the parser accepts and what the man pages are generated from. This keeps them from drifting: each lists
// exactly the table's keys, with the table's defaults.
#include <mrcheck/config.h>

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace {

std::string source_file(const std::string& name) {
  std::ifstream in(std::string(MRCHECK_FIXTURES_DIR) + "/../../" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string readme_config_section() {
  std::string all = source_file("README.md");
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

// helper and admin_helper default to this build's install paths, which README.md and etc/mrcheck.conf show as
// the packages' (or <bindir>): only their file name is compared.
bool install_path(std::string_view key) { return key == "helper" || key == "admin_helper"; }

std::string file_name(std::string_view path) { return std::string(path.substr(path.rfind('/') + 1)); }

TEST(readme_config_keys, table_shows_the_defaults) {
  std::string section = readme_config_section();
  std::map<std::string, std::string> shown;
  std::regex row(R"(\n\| `([a-z_]+)` \| ([^|]+) \|)");
  for (auto it = std::sregex_iterator(section.begin(), section.end(), row); it != std::sregex_iterator(); ++it) {
    shown[(*it)[1].str()] = (*it)[2].str();
  }
  for (const auto& k : mrcheck::config_keys()) {
    std::string key(k.key);
    ASSERT_TRUE(shown.count(key)) << key;
    const std::string& v = shown[key];
    if (install_path(k.key)) {
      EXPECT_EQ(file_name(v.substr(0, v.size() - 1)), file_name(k.default_value)) << key << ": " << v;
    } else if (k.default_value.empty()) {
      EXPECT_TRUE(v == "(none)" || v == "(built-in)") << key << ": " << v;
    } else {
      EXPECT_EQ(v, "`" + std::string(k.default_value) + "`") << key;
    }
  }
}

// etc/mrcheck.conf shows every key once, as key=default (the install paths commented out), and no other.
TEST(readme_config_keys, example_config_lists_exactly_the_keys_with_their_defaults) {
  std::string text = source_file("etc/mrcheck.conf");
  ASSERT_FALSE(text.empty());
  std::map<std::string, std::pair<bool, std::string>> lines;  // key -> (commented out, value)
  std::regex line(R"((^|\n)(#?)([a-z_]+)=([^\n]*))");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), line); it != std::sregex_iterator(); ++it) {
    EXPECT_TRUE(lines.emplace((*it)[3].str(), std::make_pair((*it)[2].length() > 0, (*it)[4].str())).second)
        << (*it)[3].str() << " twice in etc/mrcheck.conf";
  }
  std::set<std::string> keys;
  for (const auto& k : mrcheck::config_keys()) {
    std::string key(k.key);
    keys.insert(key);
    auto it = lines.find(key);
    ASSERT_NE(it, lines.end()) << key << " is not in etc/mrcheck.conf";
    auto [commented, value] = it->second;
    if (install_path(k.key)) {
      EXPECT_TRUE(commented) << key;
      EXPECT_EQ(file_name(value), file_name(k.default_value)) << key;
    } else {
      EXPECT_FALSE(commented) << key;
      EXPECT_EQ(value, k.default_value) << key;
    }
  }
  for (const auto& [key, v] : lines) EXPECT_TRUE(keys.count(key)) << "etc/mrcheck.conf sets " << key << ", no key";
}

// The man pages list the keys from the table once (man/mangen.cpp expands @@config_keys; man_pages.* checks the
// rendered pages).
TEST(readme_config_keys, man_pages_take_the_keys_from_the_table) {
  for (const char* page : {"man/spank_mrcheck.8.in", "man/mrcheck-prolog.8.in"}) {
    std::string text = source_file(page);
    ASSERT_FALSE(text.empty()) << page;
    auto at = text.find("\n@@config_keys\n");
    EXPECT_NE(at, std::string::npos) << page;
    EXPECT_EQ(text.find("\n@@config_keys\n", at + 1), std::string::npos) << page << ": the keys listed twice";
  }
}

}  // namespace
