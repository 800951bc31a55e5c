// One command's command line: its options declared once with CLI11, and from that declaration the parse, the
// usage line and the --help text, which man/mangen.cpp copies into mrcheck(1). The table of commands
// (command_table.h) holds each command's declare function.
//
// CLI11 parses (names, values, `--opt=value`, `--`); the command checks values itself afterwards, so its messages
// and exit codes do not depend on the CLI11 release (2.1 in Debian 12 to 2.6 in sid: only the API common to them
// is used here).
#pragma once

#include "commands.h"

#include <CLI/CLI.hpp>

#include <any>
#include <optional>
#include <string>
#include <string_view>

namespace mrcheck::cli {

class command_line {
 public:
  // words: the command as typed after `mrcheck` ("probe mr").
  explicit command_line(std::string words);
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

  // Declarations. value: the name --help shows for the value ("DIR"). A hidden option is parsed but not listed
  // (the internal --isolated-child).
  CLI::Option* flag(const std::string& names, bool& target, const std::string& help);
  CLI::Option* option(const std::string& names, std::string& target, const std::string& value, const std::string& help);
  // Words that are not options, all of them in `target`; `many` false: the usage shows one ([FILE]) and the
  // command refuses a second itself.
  CLI::Option* positional(const std::string& name, std::vector<std::string>& target, const std::string& value,
                          const std::string& help, bool many);
  static CLI::Option* hide(CLI::Option* o);
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
  // The listed options (not hidden, not --help), in declaration order.
  std::vector<const CLI::Option*> listed() const;
  // Every option CLI11 knows, --help and the hidden ones included.
  std::vector<const CLI::Option*> app_options() const { return app_.get_options(); }

 private:
  CLI::App app_;
  CLI::Option* help_ = nullptr;
  std::string words_;
  std::string about_;
  std::string footer_;
  std::vector<const CLI::Option*> single_;  // positionals shown as one word
  std::any options_;
};

// An option as --help lists it: "--root", "-v, --verbose"; its value name, empty for a flag.
std::string option_names(const CLI::Option& o);
std::string option_value(const CLI::Option& o);

}  // namespace mrcheck::cli
