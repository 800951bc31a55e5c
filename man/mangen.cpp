// mrcheck_mangen: writes a man page from a roff template and the only sources of truth for what it lists:
// the built programs' own --help output and mrcheck::config_keys(). Runs at build time, never installed.
// A page therefore cannot drift from --help: change the usage text and the page changes with it; remove a
// command the usage still names and the build fails here.
//
// usage: mrcheck_mangen --template FILE --out FILE [--exe NAME=ABSPATH]... [--set KEY=VALUE]...
//
// The template is roff with @KEY@ substitutions (from --set) and directive lines:
//   @@help NAME [ARGS...]   NAME ARGS --help, verbatim (must exit 0 and print something)
//   @@commands NAME         parse the "commands:" section of NAME --help; per command a subsection with its
//                           summary and its own `NAME CMD --help` verbatim
//   @@config_keys           every config key from config_keys(): key, default, meaning
//   @@check_groups W...     fail unless parse_check_groups() accepts each word (the page documents them)
#include <mrcheck/child.h>
#include <mrcheck/config.h>

#include <fmt/core.h>

#include <cctype>
#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

using mrcheck::result;
using mrcheck::status;

struct options {
  std::string template_path;
  std::string out_path;
  std::map<std::string, std::string> exes;
  std::map<std::string, std::string> vars;
};

std::vector<std::string> split_words(std::string_view s) {
  std::vector<std::string> w;
  std::istringstream in{std::string(s)};
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

std::vector<std::string> split_lines(std::string_view s) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < s.size()) {
    std::size_t nl = s.find('\n', start);
    if (nl == std::string_view::npos) nl = s.size();
    lines.emplace_back(s.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

// Text as roff sees it: backslash and hyphen-minus escaped (options stay copy-pastable), control
// characters at line start neutralised.
std::string roff_escape(std::string_view s) {
  std::string r;
  for (char c : s) {
    if (c == '\\') {
      r += "\\e";
    } else if (c == '-') {
      r += "\\-";
    } else {
      r += c;
    }
  }
  if (!r.empty() && (r[0] == '.' || r[0] == '\'')) r.insert(0, "\\&");
  return r;
}

std::string verbatim(std::string_view text) {
  std::string r = ".PP\n.RS 2\n.nf\n";
  for (const auto& l : split_lines(text)) r += l.empty() ? std::string(".sp\n") : roff_escape(l) + "\n";
  return r + ".fi\n.RE\n";
}

result<std::string> run_help(const options& o, const std::string& name, std::vector<std::string> args) {
  auto exe = o.exes.find(name);
  if (exe == o.exes.end()) return status::error(fmt::format("no --exe given for '{}'", name));
  mrcheck::child_spec spec;
  spec.argv.push_back(exe->second);
  for (auto& a : args) spec.argv.push_back(std::move(a));
  spec.argv.emplace_back("--help");
  // Leak reports at exit would turn an ASan build's --help into a failure; they are not what this checks.
  spec.env = {"PATH=/usr/bin:/bin", "LC_ALL=C", "ASAN_OPTIONS=detect_leaks=0"};
  spec.timeout = std::chrono::seconds(20);
  spec.reset_oom_score_adj = false;
  auto out = mrcheck::run_child(spec);
  if (!out) return out.error();
  std::string cmdline;
  for (const auto& a : spec.argv) cmdline += (cmdline.empty() ? "" : " ") + a;
  if (!out->exited || out->exit_code != 0) {
    return status::error(fmt::format("'{}' {}: {}", cmdline, out->describe(), out->err));
  }
  if (out->out.empty()) return status::error(fmt::format("'{}' printed nothing", cmdline));
  return out->out;
}

// The "commands:" section of the CLI's usage (cli/command_table.cpp): two-space indent, the command's words
// (lowercase, single spaces), two or more spaces, the summary.
struct command_line {
  std::vector<std::string> words;
  std::string summary;
};

result<std::vector<command_line>> parse_commands(std::string_view help) {
  std::vector<command_line> cmds;
  bool in = false;
  for (const auto& l : split_lines(help)) {
    if (l == "commands:") {
      in = true;
      continue;
    }
    if (!in) continue;
    if (l.empty() || l[0] != ' ') break;
    if (l.size() < 3 || l[1] != ' ' || !std::islower(static_cast<unsigned char>(l[2]))) continue;
    command_line c;
    std::size_t i = 2;
    while (i < l.size()) {
      std::size_t j = i;
      while (j < l.size() && (std::islower(static_cast<unsigned char>(l[j])) || l[j] == '-')) ++j;
      if (j == i) break;
      c.words.push_back(l.substr(i, j - i));
      if (j + 1 < l.size() && l[j] == ' ' && std::islower(static_cast<unsigned char>(l[j + 1]))) {
        i = j + 1;
        continue;
      }
      i = j;
      break;
    }
    std::size_t s = l.find_first_not_of(' ', i);
    if (s != std::string::npos) c.summary = l.substr(s);
    cmds.push_back(std::move(c));
  }
  if (cmds.empty()) return status::error("no 'commands:' section in the usage text");
  return cmds;
}

result<std::string> expand_commands(const options& o, const std::string& name) {
  auto help = run_help(o, name, {});
  if (!help) return help.error();
  auto cmds = parse_commands(*help);
  if (!cmds) return cmds.error();
  std::string r;
  for (const auto& c : *cmds) {
    std::string full = name;
    for (const auto& w : c.words) full += " " + w;
    auto sub = run_help(o, name, c.words);
    if (!sub) return sub.error();
    r += fmt::format(".SS \"{}\"\n{}\n", roff_escape(full), roff_escape(c.summary));
    r += verbatim(*sub);
  }
  return r;
}

std::string expand_config_keys() {
  std::string r;
  for (const auto& k : mrcheck::config_keys()) {
    r += fmt::format(".TP\n\\fB{}\\fR=\\fI{}\\fR\n{}\n", roff_escape(k.key),
                     k.default_value.empty() ? std::string("(empty)") : roff_escape(k.default_value),
                     roff_escape(k.meaning));
  }
  return r;
}

status check_groups(const std::vector<std::string>& words) {
  for (const auto& w : words) {
    if (!mrcheck::parse_check_groups(std::string_view(w))) {
      return status::error(fmt::format("the page documents --mr-check={} but parse_check_groups refuses it", w));
    }
  }
  return status::ok();
}

result<std::string> substitute(const options& o, std::string_view line) {
  std::string r;
  std::size_t i = 0;
  while (i < line.size()) {
    std::size_t a = line.find('@', i);
    std::size_t b = a == std::string_view::npos ? a : line.find('@', a + 1);
    if (b == std::string_view::npos) {
      r += line.substr(i);
      break;
    }
    std::string key(line.substr(a + 1, b - a - 1));
    auto v = o.vars.find(key);
    if (v == o.vars.end()) {
      r += line.substr(i, b - i);  // not a placeholder (an address, say): keep it, rescan from the second '@'
      i = b;
      continue;
    }
    r += line.substr(i, a - i);
    r += v->second;
    i = b + 1;
  }
  return r;
}

result<std::string> generate(const options& o) {
  std::ifstream in(o.template_path);
  if (!in) return status::error(fmt::format("cannot read template {}", o.template_path));
  std::string out;
  int lineno = 0;
  for (std::string line; std::getline(in, line);) {
    ++lineno;
    auto where = [&](const status& s) {
      return status::error(fmt::format("{}:{}: {}", o.template_path, lineno, s.message()));
    };
    if (line.starts_with("@@")) {
      auto w = split_words(std::string_view(line).substr(2));
      if (w.empty()) return where(status::error("empty directive"));
      std::string d = w[0];
      std::vector<std::string> rest(w.begin() + 1, w.end());
      if (d == "help" && !rest.empty()) {
        auto h = run_help(o, rest[0], std::vector<std::string>(rest.begin() + 1, rest.end()));
        if (!h) return where(h.error());
        out += verbatim(*h);
      } else if (d == "commands" && rest.size() == 1) {
        auto c = expand_commands(o, rest[0]);
        if (!c) return where(c.error());
        out += *c;
      } else if (d == "config_keys" && rest.empty()) {
        out += expand_config_keys();
      } else if (d == "check_groups" && !rest.empty()) {
        if (auto s = check_groups(rest); !s) return where(s);
      } else {
        return where(status::error(fmt::format("unknown or malformed directive '{}'", line)));
      }
      continue;
    }
    auto s = substitute(o, line);
    if (!s) return where(s.error());
    out += *s + "\n";
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    auto pair = [](const std::string& kv, std::map<std::string, std::string>& m) {
      auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) return false;
      m[kv.substr(0, eq)] = kv.substr(eq + 1);
      return true;
    };
    bool ok = true;
    if (a == "--template") {
      o.template_path = value();
    } else if (a == "--out") {
      o.out_path = value();
    } else if (a == "--exe") {
      ok = pair(value(), o.exes);
    } else if (a == "--set") {
      ok = pair(value(), o.vars);
    } else {
      ok = false;
    }
    if (!ok) {
      fmt::print(stderr, "mrcheck: mangen: bad argument '{}'\n", a);
      return 2;
    }
  }
  if (o.template_path.empty() || o.out_path.empty()) {
    fmt::print(stderr, "usage: mrcheck_mangen --template FILE --out FILE [--exe NAME=PATH]... [--set KEY=VALUE]...\n");
    return 2;
  }
  auto page = generate(o);
  if (!page) {
    fmt::print(stderr, "mrcheck: mangen: {}\n", page.error().message());
    return 1;
  }
  std::string tmp = o.out_path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << *page;
    if (!f.flush()) {
      fmt::print(stderr, "mrcheck: mangen: cannot write {}\n", tmp);
      return 1;
    }
  }
  if (std::rename(tmp.c_str(), o.out_path.c_str()) != 0) {
    fmt::print(stderr, "mrcheck: mangen: cannot rename {} to {}\n", tmp, o.out_path);
    return 1;
  }
  return 0;
}
