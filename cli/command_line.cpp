// The command line of one command (command_line.h).
#include "command_line.h"

#include <mrcheck/units.h>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <algorithm>

namespace mrcheck::cli {

namespace {

// --help is copied verbatim into mrcheck(1) (man/mangen.cpp): lines no longer than the ones it always had.
constexpr std::size_t k_width = 110;
constexpr std::size_t k_option_column = 24;  // "  --verbs-library PATH  " and the description after it

bool is_flag(const CLI::Option& o) { return o.get_type_name().empty(); }

// `items` after `first`, on lines of at most k_width; a continued line starts under the first item.
std::string wrap_items(const std::string& first, const std::vector<std::string>& items) {
  std::string out = first;
  std::size_t line = first.size();
  const std::string indent(first.size() + 1, ' ');
  for (const auto& item : items) {
    if (line > first.size() && line + 1 + item.size() > k_width) {
      out += "\n" + indent + item;
      line = indent.size() + item.size();
      continue;
    }
    out += " " + item;
    line += 1 + item.size();
  }
  return out + "\n";
}

// The words of `text` after `lead` (already `indent` wide), on lines of at most k_width.
std::string wrap_words(const std::string& lead, std::string_view text, std::size_t indent) {
  std::string out = lead;
  std::size_t line = lead.size();
  bool first = true;
  while (!text.empty()) {
    std::size_t end = text.find(' ');
    std::string_view w = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    if (w.empty()) continue;
    if (!first && line + 1 + w.size() > k_width) {
      out += "\n" + std::string(indent, ' ');
      line = indent;
    } else if (!first) {
      out += ' ';
      ++line;
    }
    out += w;
    line += w.size();
    first = false;
  }
  return out + "\n";
}

std::string option_names(const CLI::Option& o) {
  std::string s;
  for (const auto& n : o.get_snames()) s += (s.empty() ? "-" : ", -") + n;
  for (const auto& n : o.get_lnames()) s += (s.empty() ? "--" : ", --") + n;
  return s.empty() ? o.get_name() : s;
}

std::string option_value(const CLI::Option& o) { return is_flag(o) ? "" : o.get_type_name(); }

}  // namespace

command_line::command_line(std::string words)
    : app_(std::make_unique<CLI::App>("", "mrcheck " + words)), words_(std::move(words)) {
  help_ = app_->set_help_flag("-h,--help", "this text");
  // Unknown names and extra arguments are collected and refused by parse() in the command's own words.
  app_->allow_extras();
  // An option given twice: the last one counts, as every command's own loop did.
  app_->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

command_line::~command_line() = default;

void command_line::shape(CLI::Option* o, shown s) {
  if (s == shown::required) o->required();
  if (s == shown::hidden) o->group("");
}

void command_line::flag(const std::string& names, bool& target, const std::string& help, shown s) {
  shape(app_->add_flag(names, target, help), s);
}

void command_line::option(const std::string& names, std::string& target, const std::string& value,
                          const std::string& help, shown s) {
  shape(app_->add_option(names, target, help)->type_name(value), s);
}

void command_line::positional(const std::string& name, std::vector<std::string>& target, const std::string& value,
                              const std::string& help, bool many, shown s) {
  CLI::Option* o = app_->add_option(name, target, help)->type_name(value);
  o->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);  // not the TakeLast of the options
  if (!many) single_.push_back(o);
  shape(o, s);
}

bool command_line::given(const std::string& name) const { return app_->count(name) > 0; }

std::optional<int> command_line::parse(const args& a) {
  std::vector<std::string> reversed(a.rbegin(), a.rend());  // CLI11 takes a vector last argument first
  std::string error;
  try {
    app_->parse(reversed);
  } catch (const CLI::CallForHelp&) {
    fmt::print("{}", help());
    return k_exit_ok;
  } catch (const CLI::ParseError& e) {
    error = escape_line(e.what(), 200);
  }
  // An unknown option first: a missing required one ("--out is required") may only be its consequence.
  std::vector<std::string> extra = app_->remaining();
  if (!extra.empty()) {
    const std::string& x = extra.front();
    error = fmt::format("{} '{}'", x.size() > 1 && x[0] == '-' ? "unknown option" : "unexpected argument",
                        escape_line(x, 64));
  }
  if (error.empty()) return std::nullopt;
  return usage_error(fmt::format("{} (see mrcheck {} --help)", error, words_));
}

int command_line::usage_error(std::string_view msg) const {
  fmt::print(stderr, "mrcheck: {}: {}\n", words_, msg);
  return k_exit_usage;
}

std::vector<const CLI::Option*> command_line::listed() const {
  std::vector<const CLI::Option*> out;
  for (const CLI::Option* o : app_->get_options()) {
    if (o != help_ && !o->get_group().empty()) out.push_back(o);
  }
  return out;
}

std::vector<option_doc> command_line::docs() const {
  std::vector<const CLI::Option*> shown_options = listed();
  std::vector<option_doc> out;
  for (const CLI::Option* o : app_->get_options()) {
    if (!o->nonpositional() || o->get_lnames().empty()) continue;  // a positional
    bool hidden = std::find(shown_options.begin(), shown_options.end(), o) == shown_options.end();
    out.push_back({"--" + o->get_lnames().front(), option_value(*o), hidden});
  }
  return out;
}

std::string command_line::usage() const {
  std::vector<std::string> items;
  std::vector<std::string> positionals;
  for (const CLI::Option* o : listed()) {
    if (!o->nonpositional()) {
      bool many = std::find(single_.begin(), single_.end(), o) == single_.end();
      std::string p = o->get_type_name() + (many ? "..." : "");
      positionals.push_back(o->get_required() ? p : "[" + p + "]");
      continue;
    }
    std::string item = o->get_lnames().empty() ? option_names(*o) : "--" + o->get_lnames().front();
    if (!is_flag(*o)) item += " " + o->get_type_name();
    items.push_back(o->get_required() ? item : "[" + item + "]");
  }
  items.insert(items.end(), positionals.begin(), positionals.end());
  return wrap_items("usage: mrcheck " + words_, items);
}

std::string command_line::help() const {
  std::string out = usage();
  if (!about_.empty()) out += "\n" + about_;
  std::string options;
  for (const CLI::Option* o : listed()) {
    bool positional = !o->nonpositional();
    std::string lead = "  " + (positional ? o->get_type_name() : option_names(*o));
    if (!positional && !is_flag(*o)) lead += " " + o->get_type_name();
    lead.resize(std::max(lead.size() + 2, k_option_column), ' ');
    options += wrap_words(lead, o->get_description(), k_option_column);
  }
  if (!options.empty()) out += "\n" + options;
  if (!footer_.empty()) out += "\n" + footer_;
  return out;
}

}  // namespace mrcheck::cli
