// Fake Slurm host for the hooks test: the spank_* and slurm_* symbols srun/slurmstepd would provide.
#pragma once

extern "C" {
#include <slurm/spank.h>
}

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fake_spank {

struct host {
  spank_context_t context = S_CTX_LOCAL;
  std::map<std::string, std::string> job_env;  // spank_getenv/spank_setenv
  std::vector<std::string> env_storage;        // S_JOB_ENV backing
  std::vector<char*> env_ptrs;
  std::uint32_t job_id = 12;
  std::uint32_t step_id = 0;
  int task_id = 0;
  struct spank_option* registered = nullptr;
  std::vector<std::string> errors;
  std::vector<std::string> user_lines;
  std::vector<std::string> setenv_calls;
  std::vector<std::string> info_lines;     // slurm_info
  std::vector<std::string> verbose_lines;  // slurm_verbose
  // S_SLURM_VERSION_MAJOR/MINOR/MICRO of the Slurm this host pretends to be (valid in every context).
  std::string version_major = "22", version_minor = "05", version_micro = "8";
};
host& the_host();
void reset(spank_context_t ctx);

}  // namespace fake_spank
