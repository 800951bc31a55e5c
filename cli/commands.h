// The CLI's subcommands, one file each (cmd_<name>.cpp), each a row of the table in command_table.cpp. cmd_<name>
// takes the arguments after its words and returns the process exit code: 0 pass/warn, 1 fail, 2 usage or I/O
// error (documented in the README); declare_<name> declares its options (command_line.h), from which its parse,
// its --help and its part of mrcheck(1) come.
#pragma once

#include <string>
#include <vector>

namespace mrcheck::cli {

using args = std::vector<std::string>;
class command_line;

int cmd_report(const args& a);  // mrcheck report
int cmd_chain(const args& a);   // mrcheck chain
int cmd_dump(const args& a);    // mrcheck dump
int cmd_probe_mr(const args& a);
int cmd_probe_rdma(const args& a);
int cmd_probe_nccl(const args& a);
int cmd_explain(const args& a);
int cmd_fleet(const args& a);

void declare_report(command_line& c);
void declare_chain(command_line& c);
void declare_dump(command_line& c);
void declare_probe_mr(command_line& c);
void declare_probe_rdma(command_line& c);
void declare_probe_nccl(command_line& c);
void declare_explain(command_line& c);
void declare_fleet(command_line& c);

inline constexpr int k_exit_ok = 0;
inline constexpr int k_exit_fail = 1;
inline constexpr int k_exit_usage = 2;

}  // namespace mrcheck::cli
