// The NCCL a job's program will load (docs/job-nccl.md), found without running any
// of the job's code and without loading any library: from the task's command and environment (LD_LIBRARY_PATH,
// the Python interpreter's site-packages with the nvidia-nccl-cu* wheels, VIRTUAL_ENV, CONDA_PREFIX, the CUDA
// toolkit, the loader's cache), each candidate's version read from its ELF file (the "NCCL version X" string
// NCCL keeps in .rodata, the symbols its .dynsym exports). The rules and their sources: docs/job-nccl.md.
#pragma once

#include <mrcheck/status.h>
#include <mrcheck/sysroot.h>

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace mrcheck {

// What an NCCL library or plugin file says about itself, read with pread only (never mapped, never loaded).
struct elf_library_info {
  std::string version;           // "2.28.9+cuda12.9" from "NCCL version 2.28.9+cuda12.9"; "" when none
  int version_code = 0;          // 22809 (NCCL_VERSION_CODE: major*10000 + minor*100 + patch), 0 if unknown
  bool has_get_version = false;  // exports ncclGetVersion
  std::vector<std::string> abi;  // exported plugin entry points: ncclNetPlugin_v9, ncclTunerPlugin_v4, ...
  std::uint64_t size = 0;        // bytes
};

// Reads `path` (symlinks followed, at most 40 of them) as an x86_64/aarch64 ELF64 shared object. Errors name the
// problem: missing, a symlink loop, not a regular file (a FIFO or a device would block or never end), 0 bytes,
// not ELF, built for another machine than this build's, truncated or inconsistent headers. Never blocks: opened O_NONBLOCK, bounded reads.
result<elf_library_info> scan_nccl_library(const std::string& path);

// "2.28.9" -> 22809; "" or malformed -> 0.
int nccl_version_code(std::string_view dotted);

// The first path of `soname` in a glibc ld.so.cache file's contents ("glibc-ld.so.cache1.1", alone or after the
// old "ld.so-1.7.0" table), the one the loader takes for a program without its own search path. "" when absent.
std::string ld_cache_lookup(std::string_view cache, std::string_view soname);

struct nccl_candidate {
  std::string path;       // where it was found (the file name the loader would open)
  std::string real_path;  // symlinks resolved; "" when that failed
  std::string origin;     // "LD_LIBRARY_PATH", "nvidia-nccl wheel (VIRTUAL_ENV /v)", "system (ld.so.cache)", ...
  bool loadable = false;  // on this job's load path (the loader could pick it), not only present
  result<elf_library_info> info = status::error("not read");
};

struct nccl_plugin {
  std::string kind;       // "net" or "tuner"
  std::string requested;  // NCCL_NET_PLUGIN / NCCL_TUNER_PLUGIN value, or the default file name
  std::string path;       // found file, "" when none
  std::string origin;
  result<elf_library_info> info = status::error("not found");
};

struct job_nccl {
  std::vector<nccl_candidate> found;  // every NCCL seen, the loadable ones in the loader's order first
  int chosen = -1;                    // index into found of the one the job loads, -1 when none
  std::string why;                    // why that one ("first in LD_LIBRARY_PATH", "torch's wheel in ...")
  std::string program;                // the program resolved through PATH, "" when unknown
  std::string python;                 // the Python interpreter when the program is one (or runs under one)
  std::vector<nccl_plugin> plugins;   // net/tuner plugins NCCL would try
  const nccl_candidate* job() const { return chosen >= 0 ? &found[static_cast<std::size_t>(chosen)] : nullptr; }
};

struct job_nccl_inputs {
  std::vector<std::string> argv;  // the task's command (S_JOB_ARGV, first words); may be empty
  std::vector<std::string> env;   // the task's environment, "KEY=VALUE"
  sysroot root;                   // for /etc/ld.so.cache and the CUDA toolkit (the real root in practice)
};
job_nccl find_job_nccl(const job_nccl_inputs& in);

// One line per NCCL found and per plugin, the job's marked: "* /v/lib/python3.12/site-packages/nvidia/nccl/lib/
// libnccl.so.2  2.28.9+cuda12.9  nvidia-nccl wheel (VIRTUAL_ENV /v)  <- the job's".
std::vector<std::string> job_nccl_lines(const job_nccl& j);
// "NCCL 2.28.9+cuda12.9 (/v/.../libnccl.so.2, nvidia-nccl wheel ...)", or why none.
std::string job_nccl_summary(const job_nccl& j);
nlohmann::json job_nccl_json(const job_nccl& j);

// The environment variables that carry the job's command and library settings to a probe child, which must not
// get the real LD_LIBRARY_PATH (docs/containers.md): MRCHECK_JOB_ARGV0, MRCHECK_JOB_LD_LIBRARY_PATH, ... from
// the job's, and back. `probe nccl` reads them when present, its own environment otherwise.
std::vector<std::string> job_nccl_env_for_probe(const std::vector<std::string>& job_argv,
                                                const std::vector<std::string>& job_env);
job_nccl_inputs job_nccl_inputs_from_env(const std::vector<std::string>& own_env);

}  // namespace mrcheck
