// The generated man pages render with man-db exactly as an admin will read them (`man -l`, 80 columns,
// groff warnings on) and list what the programs really accept: every config key from config_keys(),
// every command the CLI's own --help names, with each command's current usage line, and in each command's section
// exactly the options the CLI's table of commands declares for it (cli/command_table.h).
#include "command_table.h"

#include <mrcheck/child.h>
#include <mrcheck/config.h>

#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace fs = std::filesystem;

std::string find_program(std::string_view name) {
  for (const char* dir : {"/usr/bin", "/bin", "/usr/local/bin"}) {
    fs::path p = fs::path(dir) / name;
    std::error_code ec;
    if (fs::exists(p, ec)) return p.string();
  }
  return "";
}

struct run_out {
  int code = -1;
  std::string out;
  std::string err;
};

run_out run(std::vector<std::string> argv) {
  mrcheck::child_spec spec;
  spec.argv = std::move(argv);
  // C locale: groff renders \- as an ASCII '-', so options compare as typed.
  spec.env = {"PATH=/usr/bin:/bin", "LC_ALL=C", "MANWIDTH=80", "MANPAGER=cat", "PAGER=cat"};
  spec.timeout = std::chrono::seconds(60);
  spec.reset_oom_score_adj = false;
  auto r = mrcheck::run_child(spec);
  run_out o;
  if (!r) {
    o.err = r.error().message();
    return o;
  }
  o.code = r->exited ? r->exit_code : -1;
  o.out = r->out;
  o.err = r->err;
  return o;
}

// Drops overstrike bold/underline ("X\bX", "_\bX") in case man keeps formatting on a pipe.
std::string plain(std::string_view s) {
  std::string r;
  for (char c : s) {
    if (c == '\b') {
      if (!r.empty()) r.pop_back();
      continue;
    }
    r += c;
  }
  return r;
}

std::string page_path(std::string_view name) { return std::string(MRCHECK_MAN_DIR) + "/" + std::string(name); }

std::vector<std::string> pages() {
  std::vector<std::string> p{"mrcheck.1"};
  if (MRCHECK_HAVE_SPANK_PAGE) p.emplace_back("spank_mrcheck.8");
  if (MRCHECK_HAVE_PROLOG_PAGE) p.emplace_back("mrcheck-prolog.8");
  return p;
}

class man_pages : public ::testing::Test {
 protected:
  void SetUp() override {
    man_ = find_program("man");
    if (man_.empty()) FAIL() << "man (man-db) is not installed: the pages cannot be checked; apt-get install man-db";
  }
  std::string render(std::string_view page) {
    auto r = run({man_, "-l", page_path(page)});
    EXPECT_EQ(r.code, 0) << page << ": " << r.err;
    return plain(r.out);
  }
  std::string man_;
};

TEST_F(man_pages, render_without_warnings) {
  for (const auto& p : pages()) {
    ASSERT_TRUE(fs::exists(page_path(p))) << page_path(p) << " was not generated (target mrcheck_man)";
    ASSERT_TRUE(fs::exists(page_path(p) + ".gz")) << p << ".gz was not generated";
    auto r = run({man_, "-l", "--warnings", page_path(p)});
    EXPECT_EQ(r.code, 0) << p;
    EXPECT_EQ(r.err, "") << p << " renders with warnings";
    EXPECT_GT(r.out.size(), 1000u) << p << " renders almost nothing";
  }
}

TEST_F(man_pages, every_config_key_is_documented) {
  std::vector<std::string> with_keys;
  if (MRCHECK_HAVE_SPANK_PAGE) with_keys.emplace_back("spank_mrcheck.8");
  if (MRCHECK_HAVE_PROLOG_PAGE) with_keys.emplace_back("mrcheck-prolog.8");
  if (with_keys.empty()) GTEST_SKIP() << "neither the plugin nor the prolog is built here";
  ASSERT_FALSE(mrcheck::config_keys().empty());
  for (const auto& p : with_keys) {
    std::string text = render(p);
    for (const auto& k : mrcheck::config_keys()) {
      std::string entry = std::string(k.key) + "=";
      EXPECT_NE(text.find(entry), std::string::npos) << p << " does not document config key " << k.key;
    }
  }
}

// The commands as the CLI's usage lists them: lines of the "commands:" section, two-space indent, the
// command's lowercase words.
std::vector<std::string> cli_commands(const std::string& help) {
  std::vector<std::string> cmds;
  bool in = false;
  std::size_t start = 0;
  while (start < help.size()) {
    std::size_t nl = help.find('\n', start);
    std::string l = help.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    start = nl == std::string::npos ? help.size() : nl + 1;
    if (l == "commands:") {
      in = true;
      continue;
    }
    if (!in) continue;
    if (l.empty()) break;
    if (l.rfind("  ", 0) != 0 || l.size() < 3 || l[2] == ' ') continue;
    std::size_t end = l.find("  ", 2);
    cmds.push_back(l.substr(2, end == std::string::npos ? std::string::npos : end - 2));
  }
  return cmds;
}

TEST_F(man_pages, every_subcommand_is_documented_with_its_usage) {
  auto help = run({MRCHECK_CLI, "--help"});
  ASSERT_EQ(help.code, 0);
  auto cmds = cli_commands(help.out);
  ASSERT_GE(cmds.size(), 5u) << "the usage's commands: section did not parse:\n" << help.out;
  std::string text = render("mrcheck.1");
  for (const auto& c : cmds) {
    EXPECT_NE(text.find("mrcheck " + c), std::string::npos) << "mrcheck(1) has no section for '" << c << "'";
    std::vector<std::string> argv{MRCHECK_CLI};
    std::size_t s = 0;
    while (s < c.size()) {
      std::size_t e = c.find(' ', s);
      argv.push_back(c.substr(s, e == std::string::npos ? std::string::npos : e - s));
      s = e == std::string::npos ? c.size() : e + 1;
    }
    argv.emplace_back("--help");
    auto sub = run(argv);
    EXPECT_EQ(sub.code, 0) << "'mrcheck " << c << " --help' fails: the usage names a command the CLI refuses";
    std::string first = sub.out.substr(0, sub.out.find('\n'));
    EXPECT_NE(text.find(first), std::string::npos) << "mrcheck(1) lacks the current usage line: " << first;
  }
  EXPECT_NE(text.find("--version"), std::string::npos);
}

// The generated roff of mrcheck(1), each command's subsection (`.SS "mrcheck probe mr"`) up to the next heading, with
// roff's escaped hyphens made plain.
std::map<std::string, std::string> command_sections(const std::string& roff) {
  std::map<std::string, std::string> out;
  std::istringstream in(roff);
  std::string* cur = nullptr;
  for (std::string l; std::getline(in, l);) {
    if (l.starts_with(".SS \"mrcheck ") && l.ends_with("\"")) {
      std::string words = l.substr(13, l.size() - 14);
      for (std::size_t i; (i = words.find("\\-")) != std::string::npos;) words.replace(i, 2, "-");
      cur = &out[words];
      continue;
    }
    if (l.starts_with(".SH") || l.starts_with(".SS")) cur = nullptr;
    if (!cur) continue;
    for (std::size_t i; (i = l.find("\\-")) != std::string::npos;) l.replace(i, 2, "-");
    *cur += l + "\n";
  }
  return out;
}

// Every long option named in `text`: "--" and a letter, not inside a word.
std::set<std::string> long_options_in(const std::string& text) {
  std::set<std::string> out;
  for (std::size_t i = text.find("--"); i != std::string::npos; i = text.find("--", i + 2)) {
    if (i > 0 && (std::isalnum(static_cast<unsigned char>(text[i - 1])) || text[i - 1] == '-')) continue;
    std::size_t e = i + 2;
    while (e < text.size() && (std::isalnum(static_cast<unsigned char>(text[e])) || text[e] == '-')) ++e;
    if (e > i + 2 && std::isalpha(static_cast<unsigned char>(text[i + 2]))) out.insert(text.substr(i, e - i));
  }
  return out;
}

TEST(man_page_options, each_command_section_names_exactly_the_options_its_declaration_has) {
  std::ifstream f(page_path("mrcheck.1"));
  ASSERT_TRUE(f) << page_path("mrcheck.1") << " was not generated (target mrcheck_man)";
  std::stringstream roff;
  roff << f.rdbuf();
  auto sections = command_sections(roff.str());
  std::set<std::string> table;
  for (const auto& c : mrcheck::cli::commands()) {
    std::string words(c.words);
    table.insert(words);
    auto s = sections.find(words);
    ASSERT_NE(s, sections.end()) << "mrcheck(1) has no section for the table's command '" << words << "'";
    std::set<std::string> declared;
    for (const auto& o : mrcheck::cli::options_of(c)) {
      if (o.hidden) continue;
      declared.insert(o.name);
      // Listed with its value, as the usage and the option lines show it ("--root DIR").
      if (!o.value.empty()) {
        EXPECT_NE(s->second.find(o.name + " " + o.value), std::string::npos)
            << "mrcheck " << words << ": the page does not show " << o.name << " " << o.value;
      }
    }
    ASSERT_FALSE(declared.empty()) << words << " declares no option";
    std::set<std::string> named = long_options_in(s->second);
    named.erase("--help");  // every command's; the page's SYNOPSIS says so once
    EXPECT_EQ(named, declared) << "mrcheck(1), section 'mrcheck " << words
                               << "': the options it names differ from those the command declares";
  }
  for (const auto& [words, text] : sections) {
    EXPECT_TRUE(table.count(words)) << "mrcheck(1) documents 'mrcheck " << words << "', which the table lacks";
  }
}

// The options the shipped binary parses are the table's: each declared one is accepted (with --help, so
// nothing runs), an option no command declares is refused with exit 2.
TEST(man_page_options, the_binary_accepts_the_declared_options_and_refuses_others) {
  for (const auto& c : mrcheck::cli::commands()) {
    std::vector<std::string> base{MRCHECK_CLI};
    std::istringstream w{std::string(c.words)};
    for (std::string x; w >> x;) base.push_back(x);
    for (const auto& o : mrcheck::cli::options_of(c)) {
      if (o.hidden) continue;
      auto argv = base;
      argv.push_back(o.value.empty() ? o.name : o.name + "=1");
      argv.emplace_back("--help");
      auto r = run(argv);
      EXPECT_EQ(r.code, 0) << c.words << " " << o.name << ": " << r.err;
    }
    auto argv = base;
    argv.emplace_back("--no-such-option");
    auto r = run(argv);
    EXPECT_EQ(r.code, 2) << c.words;
    EXPECT_NE(r.err.find("unknown option '--no-such-option'"), std::string::npos) << c.words << ": " << r.err;
  }
}

TEST_F(man_pages, plugin_page_documents_the_option_and_the_plugstack_line) {
  if (!MRCHECK_HAVE_SPANK_PAGE) GTEST_SKIP() << "the SPANK plugin is not built here (no Slurm headers)";
  std::string text = render("spank_mrcheck.8");
  for (const char* s : {"--mr-check[=LIST]", "spank_mrcheck.so config=", "plugstack.conf", "Incompatible Slurm plugin",
                        "memlock", "nccl", "verbose", "EXIT BEHAVIOUR", "EXAMPLES", "FILES"}) {
    EXPECT_NE(text.find(s), std::string::npos) << "spank_mrcheck(8) lacks '" << s << "'";
  }
}

}  // namespace
