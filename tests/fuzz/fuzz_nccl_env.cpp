// NCCL's settings as the registration probe reads them: the job's environment (NCCL_*), ~/.nccl.conf in the
// user's home and /etc/nccl.conf, then estimate_nccl_registration() sizing what NCCL would pin. All of it is
// the user's to choose: NCCL_BUFFSIZE=9223372036854775807 and NCCL_MIN_NCHANNELS=-1 are one `export` away.
// Input: "<environment, one KEY=VALUE a line>\0<~/.nccl.conf>\0<etc/nccl.conf>"; the files are written into a
// private temporary home. The first input byte's low 3 bits also give the HCA count (0-7).
// Invariants: no overflow or other UB on any value (UBSan), the estimate's counts are within NCCL's own limits
// (channels 0..64, connections = channels x peers x 2), sizes add up without wrapping, every note and input line
// is printable; the environment wins over the files, the user's file over /etc (NCCL's setenv(..., 0) order).
// fuzz-requires: mr_probe.h
#include "fuzz_common.h"

#include <mrcheck/mr_probe.h>

#include <filesystem>

namespace {

const std::filesystem::path& fuzz_home() {
  static const std::filesystem::path home = mrcheck::fuzz::private_dir("/tmp/mrcheck-fuzz-home-XXXXXX");
  return home;
}

// Opened once and rewritten per input (fuzz_common.h, disk_file): load_nccl_env() opens them by name as always.
const mrcheck::fuzz::disk_file& user_conf_file() {
  static const mrcheck::fuzz::disk_file f(fuzz_home() / ".nccl.conf");
  return f;
}

const mrcheck::fuzz::disk_file& etc_conf_file() {
  static const mrcheck::fuzz::disk_file f(fuzz_home() / "etc-nccl.conf");
  return f;
}

std::string_view next_part(std::string_view& rest) {
  std::size_t nul = rest.find('\0');
  std::string_view part = rest.substr(0, nul);
  rest = nul == std::string_view::npos ? std::string_view{} : rest.substr(nul + 1);
  return part;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mrcheck;
  if (size < 1) return 0;
  const int hcas = data[0] & 7;
  std::string_view rest = fuzz::as_text(data + 1, size - 1);
  std::string_view env_text = next_part(rest);
  std::string_view user_conf = next_part(rest);
  std::string_view etc_conf = next_part(rest);

  std::vector<std::string> job_env;
  std::size_t pos = 0;
  while (pos < env_text.size() && job_env.size() < 256) {
    std::size_t nl = env_text.find('\n', pos);
    std::string_view e = std::string_view(env_text).substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? env_text.size() : nl + 1;
    // NCCL_CONF_FILE names any path (/dev/zero, a fifo): the harness keeps file reads inside its own home.
    if (e.starts_with("NCCL_CONF_FILE")) continue;
    job_env.emplace_back(e);
  }
  const auto& home = fuzz_home();
  user_conf_file().set(user_conf);
  etc_conf_file().set(etc_conf);

  nccl_env env = load_nccl_env(job_env, home.string(), etc_conf_file().path().string());
  // The environment wins: a NAME=VALUE of the environment is what get() returns.
  for (const auto& e : job_env) {
    auto eq = e.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string name = e.substr(0, eq);
    bool first = true;  // only the first occurrence of a name in the environment counts (getenv)
    for (const auto& o : job_env) {
      if (&o == &e) break;
      if (o.compare(0, eq + 1, e, 0, eq + 1) == 0) first = false;
    }
    if (!first) continue;
    auto v = env.get(name);
    MRCHECK_FUZZ_REQUIRE(v.has_value(), name);
  }

  nccl_estimate est = estimate_nccl_registration(env, hcas);
  MRCHECK_FUZZ_REQUIRE(est.channels >= 0 && est.channels <= 64, std::to_string(est.channels));
  MRCHECK_FUZZ_REQUIRE(est.p2p_channels >= 0 && est.p2p_channels <= est.channels, std::to_string(est.p2p_channels));
  if (!est.ib_disabled) {
    MRCHECK_FUZZ_REQUIRE(est.connections == est.channels * est.net_peers * 2, std::to_string(est.connections));
  }
  MRCHECK_FUZZ_REQUIRE(est.per_connection >= est.buff_ll && est.per_connection >= est.buff_simple,
                       "per_connection wrapped");
  for (const auto& n : est.notes) MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(n), n);
  for (const auto& i : est.inputs) MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(i), i);
  MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(est.formula), est.formula);
  MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(est.channels_from), est.channels_from);
  return 0;
}
