// One command's command line: its options declared once with CLI11, and from that declaration the parse, the
// usage line and the --help text, which man/mangen.cpp copies into mrcheck(1). The table of commands
// (command_table.h) holds each command's declare function.
//
// CLI11 parses (names, values, `--opt=value`, `--`); the command checks values itself afterwards, so its messages
// and exit codes do not depend on the CLI11 release (2.1 in Debian 12 to 2.6 in sid: only the API common to them
// is used here).
#pragma once

#include "commands.h"

#include <any>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

// CLI11 stays inside command_line.cpp: its header is most of the compile time of a file that includes it.
namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace mrcheck::cli {

// How an option shows: in the usage as [--opt VALUE] (listed), as --opt VALUE and refused when absent (required),
// or nowhere though parsed (hidden: the internal --isolated-child).
enum class shown { listed, required, hidden };

// An option as --help lists it and mrcheck(1) names it.
struct option_doc {
  std::string name;   // its first long name, "--root"
  std::string value;  // "DIR"; empty for a flag
  bool hidden = false;
};

class command_line {
 public:
  // words: the command as typed after `mrcheck` ("probe mr").
  explicit command_line(std::string words);
  ~command_line();
  command_line(const command_line&) = delete;
  command_line& operator=(const command_line&) = delete;

  // The options' storage, made once by the command's declare function and bound by reference to its CLI11
  // options; options<O>() is it after parse (std::bad_any_cast on another type: a programming error).
  template <typename O>
  O& make_options() {
    return options_.emplace<O>();
  }
  template <typename O>
  const O& options() const {
    return std::any_cast<const O&>(options_);
  }

  // Declarations. names: "--json", "-v,--verbose"; value: the name --help shows for the value ("DIR").
  void flag(const std::string& names, bool& target, const std::string& help, shown s = shown::listed);
  void option(const std::string& names, std::string& target, const std::string& value, const std::string& help,
              shown s = shown::listed);
  // Words that are not options, all of them in `target`; `many` false: the usage shows one ([FILE]) and the
  // command refuses a second itself.
  void positional(const std::string& name, std::vector<std::string>& target, const std::string& value,
                  const std::string& help, bool many, shown s = shown::listed);
  // Text --help prints after the usage line, and after the options (the exit line), each as given.
  void about(std::string text) { about_ = std::move(text); }
  void footer(std::string text) { footer_ = std::move(text); }
  // Whether an option (by its first long name, "--config") was on the command line.
  bool given(const std::string& name) const;

  // Parses `a`, the arguments after the command's words. Nothing: run the command. Otherwise the exit code,
  // after printing --help on stdout (k_exit_ok) or a one-line usage error on stderr (k_exit_usage).
  std::optional<int> parse(const args& a);
  // "mrcheck: WORDS: MSG" on stderr; returns k_exit_usage.
  int usage_error(std::string_view msg) const;

  const std::string& words() const { return words_; }
  std::string usage() const;  // "usage: mrcheck WORDS [--json] ...", wrapped, with its newline
  std::string help() const;   // usage, about, one line per listed option, footer
  // Every option with a long name, --help and the hidden ones marked hidden, in declaration order.
  std::vector<option_doc> docs() const;

 private:
  void shape(CLI::Option* o, shown s);
  std::vector<const CLI::Option*> listed() const;  // not hidden, not --help; positionals included

  std::unique_ptr<CLI::App> app_;
  CLI::Option* help_ = nullptr;
  std::string words_;
  std::string about_;
  std::string footer_;
  std::vector<const CLI::Option*> single_;  // positionals shown as one word
  std::any options_;
};

}  // namespace mrcheck::cli
