#include "fake_spank.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace fake_spank {

host& the_host() {
  static host h;
  return h;
}

void reset(spank_context_t ctx) {
  the_host() = host{};
  the_host().context = ctx;
}

}  // namespace fake_spank

namespace {
spank_err_t err(int e) { return static_cast<spank_err_t>(e); }
std::string vformat(const char* fmt, va_list ap) {
  char buf[8192];
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  return buf;
}
}  // namespace

extern "C" {

spank_context_t spank_context(void) { return fake_spank::the_host().context; }

const char* spank_strerror(spank_err_t err) { return err == ESPANK_SUCCESS ? "Success" : "fake spank error"; }

spank_err_t spank_option_register(spank_t, struct spank_option* opt) {
  fake_spank::the_host().registered = opt;
  return err(ESPANK_SUCCESS);
}

spank_err_t spank_get_item(spank_t, spank_item_t item, ...) {
  auto& h = fake_spank::the_host();
  va_list ap;
  va_start(ap, item);
  spank_err_t rc = err(ESPANK_SUCCESS);
  // plugstack.c: the S_SLURM_VERSION* items are valid in every context, the rest only in slurmstepd.
  if (item == S_SLURM_VERSION_MAJOR || item == S_SLURM_VERSION_MINOR || item == S_SLURM_VERSION_MICRO) {
    const std::string& v = item == S_SLURM_VERSION_MAJOR   ? h.version_major
                           : item == S_SLURM_VERSION_MINOR ? h.version_minor
                                                           : h.version_micro;
    *va_arg(ap, char**) = const_cast<char*>(v.c_str());
    va_end(ap);
    return rc;
  }
  if (h.context != S_CTX_REMOTE) {
    va_end(ap);
    return err(ESPANK_NOT_REMOTE);
  }
  switch (item) {
    case S_JOB_ID: *va_arg(ap, std::uint32_t*) = h.job_id; break;
    case S_JOB_STEPID: *va_arg(ap, std::uint32_t*) = h.step_id; break;
    case S_TASK_ID: *va_arg(ap, int*) = h.task_id; break;
    case S_JOB_ENV: {
      h.env_storage.clear();
      h.env_ptrs.clear();
      for (const auto& [k, v] : h.job_env) h.env_storage.push_back(k + "=" + v);
      for (auto& s : h.env_storage) h.env_ptrs.push_back(s.data());
      h.env_ptrs.push_back(nullptr);
      *va_arg(ap, char***) = h.env_ptrs.data();
      break;
    }
    default: rc = err(ESPANK_BAD_ARG);
  }
  va_end(ap);
  return rc;
}

spank_err_t spank_getenv(spank_t, const char* var, char* buf, int len) {
  auto& h = fake_spank::the_host();
  if (h.context != S_CTX_REMOTE) return err(ESPANK_NOT_REMOTE);
  auto it = h.job_env.find(var);
  if (it == h.job_env.end()) return err(ESPANK_ENV_NOEXIST);
  if (it->second.size() + 1 > static_cast<std::size_t>(len)) return err(ESPANK_NOSPACE);
  std::memcpy(buf, it->second.c_str(), it->second.size() + 1);
  return err(ESPANK_SUCCESS);
}

spank_err_t spank_setenv(spank_t, const char* var, const char* val, int) {
  auto& h = fake_spank::the_host();
  if (h.context != S_CTX_REMOTE) return err(ESPANK_NOT_REMOTE);
  h.job_env[var] = val;
  h.setenv_calls.push_back(std::string(var) + "=" + val);
  return err(ESPANK_SUCCESS);
}

void slurm_error(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fake_spank::the_host().errors.push_back(vformat(fmt, ap));
  va_end(ap);
}
void slurm_spank_log(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fake_spank::the_host().user_lines.push_back(vformat(fmt, ap));
  va_end(ap);
}
void slurm_info(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fake_spank::the_host().info_lines.push_back(vformat(fmt, ap));
  va_end(ap);
}
void slurm_verbose(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fake_spank::the_host().verbose_lines.push_back(vformat(fmt, ap));
  va_end(ap);
}
void slurm_debug(const char*, ...) {}
void slurm_debug2(const char*, ...) {}
void slurm_debug3(const char*, ...) {}

}  // extern "C"
