// JSON of the NCCL pair probe: the rank children's result lines and the extra keys of `probe nccl --json`.
#include <mrcheck/nccl_probe.h>
#include <mrcheck/units.h>

#include <nlohmann/json.hpp>

#include <limits>
#include <string>

namespace mrcheck {

void to_json(nlohmann::json& j, const nccl_rank_report& r) {
  nlohmann::json phases = nlohmann::json::array();
  for (const auto& [name, ms] : r.phases_ms) phases.push_back({{"phase", name}, {"ms", ms}});
  j = nlohmann::json{{"rank", r.rank},
                     {"stage", r.stage},
                     {"ok", r.ok},
                     {"no_gpu", r.no_gpu},
                     {"missing_library", r.missing_library},
                     {"error", r.error},
                     {"nccl_result", r.nccl_result},
                     {"nccl_last_error", r.nccl_last_error},
                     {"nccl_version", r.nccl_version},
                     {"cuda_driver_version", r.cuda_driver_version},
                     {"nccl_library", r.nccl_library},
                     {"device", r.device},
                     {"count", r.count},
                     {"mismatches", r.mismatches},
                     {"first_bad_index", r.first_bad_index},
                     {"first_bad_value", r.first_bad_value},
                     {"expected", r.expected},
                     {"phases", phases}};
}

namespace {

// The rank children run the job's environment (LD_PRELOAD, NCCL plugins), so their result line is untrusted:
// get<int>() on 1e300 is a float-cast overflow (UB) and on 2^40 a silent wrap. An integer field must be a JSON
// integer within T's range; anything else throws a json exception, as a wrong type already does.
template <class T>
T integer_field(const nlohmann::json& j, const char* key, T def, bool required = false) {
  if (!required && !j.contains(key)) return def;
  const nlohmann::json& v = j.at(key);
  if (!v.is_number_integer()) {
    throw nlohmann::json::type_error::create(302, std::string(key) + " must be an integer, but is " + v.type_name(),
                                             &v);
  }
  bool fits = false;
  if (v.is_number_unsigned()) {
    fits = v.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<T>::max());
  } else {
    auto s = v.get<std::int64_t>();
    fits = std::numeric_limits<T>::is_signed ? s >= static_cast<std::int64_t>(std::numeric_limits<T>::min()) &&
                                                   s <= static_cast<std::int64_t>(std::numeric_limits<T>::max())
                                             : s >= 0;
  }
  if (!fits) throw nlohmann::json::out_of_range::create(406, std::string(key) + " is out of range", &v);
  return v.get<T>();
}

}  // namespace

void from_json(const nlohmann::json& j, nccl_rank_report& r) {
  r.rank = integer_field<int>(j, "rank", -1, true);
  r.stage = j.value("stage", "");
  r.ok = j.value("ok", false);
  r.no_gpu = j.value("no_gpu", false);
  r.missing_library = j.value("missing_library", false);
  r.error = j.value("error", "");
  r.nccl_result = integer_field<int>(j, "nccl_result", 0);
  r.nccl_last_error = j.value("nccl_last_error", "");
  r.nccl_version = integer_field<int>(j, "nccl_version", 0);
  r.cuda_driver_version = integer_field<int>(j, "cuda_driver_version", 0);
  r.nccl_library = j.value("nccl_library", "");
  r.device = j.value("device", "");
  r.count = integer_field<std::uint64_t>(j, "count", 0);
  r.mismatches = integer_field<std::uint64_t>(j, "mismatches", 0);
  r.first_bad_index = integer_field<std::int64_t>(j, "first_bad_index", -1);
  r.first_bad_value = j.value("first_bad_value", 0.0);
  r.expected = j.value("expected", 0.0);
  r.phases_ms.clear();
  if (j.contains("phases")) {
    for (const auto& p : j.at("phases"))
      r.phases_ms.emplace_back(p.at("phase").get<std::string>(), p.at("ms").get<double>());
  }
}

void add_nccl_pair_json(nlohmann::json& j, const nccl_pair_outcome& o, bool with_logs) {
  const nccl_log_facts& f = o.log;
  j["mode"] = std::string(to_string(o.mode));
  j["transport"] = f.transports;
  j["channels"] = f.channels;
  j["network"] = f.network;
  j["ib_devices"] = f.ib_devices;
  j["gdr"] = f.gdr ? nlohmann::json(*f.gdr) : nlohmann::json(nullptr);
  j["gdr_note"] = f.gdr_note;
  j["dmabuf"] = f.dmabuf ? nlohmann::json(*f.dmabuf) : nlohmann::json(nullptr);
  j["nnodes"] = f.nnodes ? nlohmann::json(*f.nnodes) : nlohmann::json(nullptr);
  int nccl_version = 0;
  int cuda_version = 0;
  std::string library;
  for (const auto& r : o.ranks) {
    if (r.report && r.report->nccl_version) nccl_version = r.report->nccl_version;
    if (r.report && r.report->cuda_driver_version) cuda_version = r.report->cuda_driver_version;
    if (r.report && library.empty()) library = r.report->nccl_library;
  }
  j["nccl_version"] = f.version.empty() ? nccl_version_text(nccl_version) : f.version;
  j["nccl_version_code"] = nccl_version;
  j["nccl_library"] = library;
  j["cuda_driver_version"] = cuda_version_text(cuda_version);
  nlohmann::json init = nlohmann::json::array();
  for (const auto& t : f.init_timings) {
    nlohmann::json parts = nlohmann::json::object();
    for (const auto& [k, v] : t.parts) parts[k] = v;
    init.push_back({{"rank", t.rank}, {"nranks", t.nranks}, {"total_s", t.total_s}, {"parts_s", parts}});
  }
  j["timings"] = {{"wall_ms", o.elapsed.count()}, {"nccl_init", init}};
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& r : o.ranks) {
    nlohmann::json jr = {{"rank", r.rank},
                         {"outcome", r.describe()},
                         {"last_stage", r.last_stage},
                         {"elapsed_ms", r.elapsed.count()},
                         {"output_truncated", r.truncated}};
    nlohmann::json timeline = nlohmann::json::array();
    for (const auto& [event, ms] : r.timeline_ms) timeline.push_back({{"event", event}, {"ms", ms}});
    jr["timeline"] = std::move(timeline);
    if (r.report) jr["report"] = *r.report;
    if (with_logs) {
      jr["stdout"] = r.out;
      jr["stderr"] = r.err;
    }
    ranks.push_back(std::move(jr));
  }
  j["ranks"] = std::move(ranks);
  j["timed_out"] = o.timed_out;
  j["nccl_warnings"] = f.warnings;
  j["nccl_conf"] = o.nccl_conf;
  j["user_nccl_env"] = o.user_nccl_env;
  j["env_set"] = o.env_set;
  if (o.mode == nccl_mode::node_pair) {
    j["port"] = o.port;
    j["refused"] = o.refused;
  }
  j["rdma_devices"] = o.rdma_devices ? nlohmann::json(*o.rdma_devices) : nlohmann::json(nullptr);
  if (!o.setup_error.empty()) j["setup_error"] = o.setup_error;
}

}  // namespace mrcheck
