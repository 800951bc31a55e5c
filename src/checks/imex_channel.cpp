// The post-exec check `imex_channel` (include/mrcheck/checks.h): on a node that serves an IMEX domain, the task
// sees at least one IMEX channel device in its own mount namespace and may open it read-write. Without one,
// NCCL's multi-node NVLink set-up cannot allocate a fabric-handle buffer and, since NCCL 2.27.3, fails every
// communicator (docs/facts/mnnvl.md §1, §4). Pure: the plugin's watcher reads the facts (read_task_imex).
#include <mrcheck/checks.h>
#include <mrcheck/fabric.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace mrcheck {

namespace {

std::string channel_names(const std::vector<unsigned>& cs) {
  std::vector<std::string> names;
  for (unsigned c : cs) names.push_back(fmt::format("channel{}", c));
  return fmt::format("{}", fmt::join(names, ", "));
}

constexpr std::string_view k_channel_hint =
    "give the job an IMEX channel: SwitchType=switch/nvidia_imex in slurm.conf, or the container runtime's device "
    "list (NVIDIA_IMEX_CHANNELS, --device /dev/nvidia-caps-imex-channels/channel0); a job that needs no multi-node "
    "NVLink runs with NCCL_MNNVL_ENABLE=0";

}  // namespace

std::optional<check_result> check_imex_channel(const imex_facts& node, const task_imex_view& task) {
  if (!node_serves_imex(node) || !task.read) return std::nullopt;
  check_result r;
  r.id = "imex_channel";
  r.owner = fix_owner::site;
  const std::string where = fmt::format("the node {}", node.channels.empty()
                                                           ? std::string("has no channel of its own")
                                                           : fmt::format("has {}", channel_names(node.channels)));
  if (!task.seen.channels_dir || task.seen.channels.empty()) {
    r.result = verdict::fail;
    r.summary = fmt::format(
        "no IMEX channel in the task's mount namespace ({} {}; {}): multi-node NVLink "
        "communicators fail (NCCL 2.27.3+)",
        k_imex_channels_dir, task.seen.channels_dir ? "is empty" : "is missing", where);
    r.hint = std::string(k_channel_hint);
    return r;
  }
  if (task.usable.empty()) {
    r.result = verdict::fail;
    r.summary = fmt::format(
        "the task sees IMEX {} but may not open {} read-write (permission denied for the job "
        "user): multi-node NVLink communicators fail (NCCL 2.27.3+)",
        channel_names(task.seen.channels), task.seen.channels.size() == 1 ? "it" : "any");
    r.hint =
        "give the job user read-write access to its IMEX channel (the channel's mode or group, or "
        "switch/nvidia_imex)";
    return r;
  }
  r.result = verdict::pass;
  r.owner = fix_owner::none;
  r.summary = fmt::format("IMEX {} in the task's mount namespace, read-write for the job user",
                          channel_names(task.usable));
  return r;
}

}  // namespace mrcheck
