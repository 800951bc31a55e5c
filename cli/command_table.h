// The CLI's one table of commands: the dispatcher (cli/main.cpp), the usage text and the tests
// (tests/package/man_pages_test.cpp) all read it. A command is a row here and a cmd_<name>.cpp.
#pragma once

#include "command_line.h"

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mrcheck::cli {

struct command {
  std::string_view words;          // as typed after `mrcheck`: "report", "probe mr"
  std::string_view summary;        // one line, in the usage's commands: section
  int (*run)(const args&);         // the arguments after the words; the exit code
  void (*declare)(command_line&);  // its options, as run parses them
};

std::span<const command> commands();

// `mrcheck --help`: the commands and their summaries from the table. man/mangen.cpp reads its "commands:" section.
std::string usage_text();

// Runs the command that argv (after the program name) names; a usage error for none.
int dispatch(const args& argv);

// A command's options as its --help lists them (and so mrcheck(1)), from its declare function.
std::vector<option_doc> options_of(const command& c);

}  // namespace mrcheck::cli
