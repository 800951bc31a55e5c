// Each check's owner (include/mrcheck/owner.h). tests/unit/owner_test.cpp holds every registered check to a
// row here.
#include <mrcheck/owner.h>

#include <array>
#include <utility>

namespace mrcheck {

namespace {

constexpr std::array<std::pair<std::string_view, fix_owner>, 27> k_owners{{
    // The job's limits: what the job's shell, script or srun options set (the check names the hop, and
    // the owner with it, where it can).
    {"memlock", fix_owner::job},
    {"stack", fix_owner::job},
    {"nofile", fix_owner::job},
    {"memlock_exec", fix_owner::job},
    // The node's stack.
    {"rdma_stack", fix_owner::node},
    {"hca_fw", fix_owner::node},
    {"gpu_driver", fix_owner::node},
    {"gpudirect", fix_owner::node},
    {"cuda_driver", fix_owner::node},
    {"nccl", fix_owner::node},
    {"bar1", fix_owner::node},
    {"slurmd_memlock", fix_owner::node},
    {"mnnvl", fix_owner::node},  // the GPUs' fabric and the node's IMEX daemon
    {"max_map_count", fix_owner::node},
    {"hugepages", fix_owner::node},
    {"mr_host", fix_owner::node},
    {"dmabuf", fix_owner::node},
    {"mr_gpu", fix_owner::node},
    {"nccl_pair", fix_owner::node},
    {"data_plane", fix_owner::node},  // the port, its GID table, the route: the node's network
    {"revalidate", fix_owner::node},
    // slurm.conf: the same for every node.
    {"propagate_limits", fix_owner::site},
    // The job's IMEX channel: switch/nvidia_imex or the container runtime's device list (docs/facts/mnnvl.md §4).
    {"imex_channel", fix_owner::site},
    // The same channel as the probe's fabric-handle buffer needs it (src/checks/mnnvl_handle.cpp: node when the
    // probe sees a usable channel that the driver refuses).
    {"mnnvl_handle", fix_owner::site},
    // The job's image against the host (docs/containers.md).
    {"container", fix_owner::job},
    {"container_mr", fix_owner::job},
    {"container_nccl", fix_owner::job},
}};

}  // namespace

fix_owner default_owner(std::string_view check_id) {
  for (const auto& [id, owner] : k_owners) {
    if (id == check_id) return owner;
  }
  return fix_owner::none;
}

fix_owner owner_of(const check_result& c) { return c.owner != fix_owner::none ? c.owner : default_owner(c.id); }

}  // namespace mrcheck
