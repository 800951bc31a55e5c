// The fleet: many nodes' stack fingerprints side by side (`mrcheck fleet`, cli/cmd_fleet.cpp). Per fact the
// majority value and the nodes that differ, grouped in Slurm hostlist form, with the check that fails on them
// because of it: 3 nodes of 64 on another driver are found before a job lands on them.
#pragma once

#include <mrcheck/history.h>
#include <mrcheck/status.h>

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace mrcheck {

struct fleet_node {
  std::string name;
  stack_fingerprint fp;
  std::map<std::string, std::string> failing;  // check id -> summary, for checks that fail on the node
  std::int64_t mtime = 0;                      // the newest report of a node wins
};

// A report as `mrcheck report --json`, `mrcheck-prolog --json` or a report_dir file writes it: needs a "stack"
// object. The node is "node", else slurm.node, else stack.host, else `fallback_name`. Only the top-level keys
// it needs are kept while parsing.
result<fleet_node> fleet_node_from_json(std::string_view text, const std::string& fallback_name);

struct fleet_outlier {
  std::string value;  // "" = the fact is absent on these nodes
  std::vector<std::string> nodes;
  std::map<std::string, std::string> failing;  // check -> summary (first node's), checks the fact matters for
};
struct fleet_fact {
  std::string key;
  std::string majority;
  std::size_t majority_nodes = 0;
  std::vector<fleet_outlier> outliers;  // biggest group first
};
struct fleet_result {
  std::size_t nodes = 0;
  std::size_t same = 0;  // facts equal on every node
  std::vector<fleet_fact> differ;
  bool outlier_fails = false;  // an outlier fails a check its difference matters for
};

fleet_result compare_fleet(const std::vector<fleet_node>& nodes);
// "node[017,033]: mlx5_core 6.1.0-28-amd64 (inbox) while 62 nodes run 24.10-1.1.4 (OFED): rdma_stack fails: ..."
std::string fleet_text(const fleet_result& r);
nlohmann::json fleet_json(const fleet_result& r);

}  // namespace mrcheck
