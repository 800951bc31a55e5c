// The job's command and library settings, carried to the probe child under MRCHECK_JOB_* names (the child must
// not get the real LD_LIBRARY_PATH, docs/containers.md), and read back there. Small and apart from job_nccl.cpp:
// the SPANK plugin's core needs this object of the probes layer's archive and not job_nccl.cpp's
// (src/CMakeLists.txt links the layer archives; the linker takes only the objects used).
#include <mrcheck/job_nccl.h>

#include <fmt/format.h>

#include <algorithm>

namespace mrcheck {

namespace {

std::string env_value(const std::vector<std::string>& env, std::string_view key) {
  for (const auto& e : env) {
    if (e.size() > key.size() && e.compare(0, key.size(), key) == 0 && e[key.size()] == '=')
      return e.substr(key.size() + 1);
  }
  return {};
}

}  // namespace

namespace {
constexpr std::string_view k_job_env_prefix = "MRCHECK_JOB_";
constexpr std::string_view k_job_env_names[] = {"LD_LIBRARY_PATH",  "PATH",       "VIRTUAL_ENV",
                                                "CONDA_PREFIX",     "PYTHONPATH", "PYTHONNOUSERSITE",
                                                "CUDA_HOME",        "CUDA_PATH",  "NCCL_NET_PLUGIN",
                                                "NCCL_TUNER_PLUGIN"};
}  // namespace

std::vector<std::string> job_nccl_env_for_probe(const std::vector<std::string>& job_argv,
                                                const std::vector<std::string>& job_env) {
  std::vector<std::string> out;
  if (!job_argv.empty()) out.push_back(fmt::format("{}ARGV0={}", k_job_env_prefix, job_argv.front()));
  for (std::string_view n : k_job_env_names) {
    for (const auto& e : job_env) {
      if (e.size() > n.size() && e.compare(0, n.size(), n) == 0 && e[n.size()] == '=') {
        out.push_back(fmt::format("{}{}", k_job_env_prefix, e));
        break;
      }
    }
  }
  return out;
}

job_nccl_inputs job_nccl_inputs_from_env(const std::vector<std::string>& own_env) {
  job_nccl_inputs in;
  bool from_job = std::any_of(own_env.begin(), own_env.end(),
                              [](const std::string& e) { return e.starts_with(k_job_env_prefix); });
  if (!from_job) {
    in.env = own_env;
    return in;
  }
  // HOME is the job user's either way (the probe keeps it).
  if (std::string home = env_value(own_env, "HOME"); !home.empty()) in.env.push_back("HOME=" + home);
  for (const auto& e : own_env) {
    if (!e.starts_with(k_job_env_prefix)) continue;
    std::string rest = e.substr(k_job_env_prefix.size());
    if (rest.starts_with("ARGV0=")) {
      in.argv.push_back(rest.substr(6));
    } else {
      in.env.push_back(rest);
    }
  }
  return in;
}

}  // namespace mrcheck
