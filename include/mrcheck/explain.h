// `mrcheck explain` as one call: a log in, its findings (what the program itself called fatal, with cause and fix),
// the path note and the container notes out, as text or as the JSON of docs/schema/explain.schema.json.
//
// explain_log() reads the log once, line by line in bounded memory (scan_fd, include/mrcheck/nccl_log.h): each line
// is classified once and handed to the listeners that asked for its words (failure events and ranks in the scanner,
// the container evidence, the path lines). Node facts are read only when there is something to judge with them.
// The front end (cli/cmd_explain.cpp) only parses options and prints.
#pragma once

#include <mrcheck/container_runtime.h>
#include <mrcheck/nccl_log.h>
#include <mrcheck/status.h>
#include <mrcheck/sysroot.h>

#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>
#include <vector>

namespace mrcheck {

struct explain_options {
  std::string source = "-";  // how the output names the log (a file name, "-" for stdin); escaped when printed
};

struct explain_report {
  std::string source;  // escaped
  nccl_log_scanner scanner;
  container_log_scan containers;
  evidence_origin origin;
  std::vector<finding> findings;  // in order of first line; empty: no failure (exit 0)
  std::optional<path_note> path;
};

// Explains the log read from `fd` (to EOF) with the facts of `root` (this node when root.is_host()). Error status
// only when read() fails; whatever the bytes are (binary, invalid UTF-8, a line of gigabytes, a truncated file)
// the report is made, in time linear in the log and memory bounded by the scanner's caps.
status explain_log(int fd, const sysroot& root, const explain_options& opts, explain_report& out);

// The findings, the container notes and the path note, as `mrcheck explain` prints them.
std::string explain_text(const explain_report& r);
// The JSON documented at the top of cli/cmd_explain.cpp (schema_version included).
nlohmann::json explain_json(const explain_report& r);

}  // namespace mrcheck
