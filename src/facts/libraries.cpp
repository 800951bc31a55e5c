// Library facts: which libibverbs / libcuda / libnccl the dynamic loader really picks, found the way NCCL finds
// them (dlopen + dlvsym, docs/facts/verbs-and-nccl.md §1, §3), and their versions. Host only: under --root the
// libraries of this machine say nothing about the dumped node, so collect.cpp reads the dump's libraries.json instead.
#include <mrcheck/facts.h>

#include <mrcheck/facts.h>
#include "facts/internal.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <dlfcn.h>
#include <link.h>

#include <climits>
#include <cstdlib>
#include <cstring>

namespace mrcheck {

namespace {

std::string dl_error() {
  const char* e = ::dlerror();
  return e ? escape_line(e, 200) : std::string("unknown dlopen error");
}

}  // namespace

std::string loaded_library_path(void* handle) {
  struct link_map* lm = nullptr;
  if (::dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || lm == nullptr || lm->l_name == nullptr) return "";
  char buf[PATH_MAX];
  if (::realpath(lm->l_name, buf) == nullptr) return lm->l_name;
  return buf;
}

result<library_fact> load_library(const std::string& name, const std::vector<std::string>& symbols) {
  ::dlerror();
  void* h = ::dlopen(name.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (h == nullptr) return status::error(fmt::format("dlopen {}: {}", escape_line(name, 128), dl_error()));
  library_fact f;
  f.requested = name;
  f.path = loaded_library_path(h);
  f.version = library_version_from_path(f.path);
  for (const auto& s : symbols) {
    auto at = s.find('@');
    void* sym = at == std::string::npos ? ::dlsym(h, s.c_str())
                                        : ::dlvsym(h, s.substr(0, at).c_str(), s.substr(at + 1).c_str());
    f.symbols[s] = sym != nullptr;
  }
  // libibverbs has no threads and unloads cleanly; the others are never unloaded (see below).
  ::dlclose(h);
  return f;
}

// Loads `name`, calls `int fn(int*)` (cuDriverGetVersion / ncclGetVersion: both return 0 on success) and keeps
// the library loaded: libcuda and libnccl start threads and register atexit handlers, and unloading them under
// those is how a checker crashes at exit. The CLI and prolog are short-lived, so the handle is left open.
result<int> call_version(const std::string& name, const char* fn_name, library_fact* lib_out) {
  ::dlerror();
  void* h = ::dlopen(name.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (h == nullptr) return status::error(fmt::format("dlopen {}: {}", name, dl_error()));
  if (lib_out) {
    lib_out->requested = name;
    lib_out->path = loaded_library_path(h);
    lib_out->version = library_version_from_path(lib_out->path);
  }
  using version_fn = int (*)(int*);
  void* sym = ::dlsym(h, fn_name);
  if (sym == nullptr) return status::error(fmt::format("{}: no symbol {}", name, fn_name));
  version_fn fn = nullptr;
  static_assert(sizeof fn == sizeof sym);
  std::memcpy(&fn, &sym, sizeof fn);  // POSIX guarantees the round trip; memcpy avoids the cast warning
  int v = 0;
  int rc = fn(&v);
  if (rc != 0) return status::error(fmt::format("{}() in {} returned error {}", fn_name, name, rc));
  if (lib_out) lib_out->symbols[fn_name] = true;
  return v;
}

library_facts load_library_facts(const std::string& verbs_library) {
  library_facts l;
  try {
    l.libibverbs = load_library(verbs_library, {"ibv_get_device_list@IBVERBS_1.1", "ibv_reg_mr_iova2@IBVERBS_1.8",
                                                "ibv_reg_dmabuf_mr@IBVERBS_1.12"});
    library_fact cuda;
    l.cuda_driver_version = call_version("libcuda.so.1", "cuDriverGetVersion", &cuda);
    l.libcuda = cuda.path.empty() && !l.cuda_driver_version ? result<library_fact>(l.cuda_driver_version.error())
                                                            : result<library_fact>(cuda);
    library_fact nccl;
    l.nccl_version = call_version("libnccl.so.2", "ncclGetVersion", &nccl);
    l.libnccl = nccl.path.empty() && !l.nccl_version ? result<library_fact>(l.nccl_version.error())
                                                     : result<library_fact>(nccl);
  } catch (const std::exception& e) {
    // Only an allocation can throw here, and on a second thread an escaping exception is std::terminate:
    // report every library fact as unknown instead.
    status s = status::error(fmt::format("loading the libraries: {}", escape_line(e.what(), 200)));
    l.libibverbs = l.libcuda = l.libnccl = s;
    l.cuda_driver_version = l.nccl_version = s;
  }
  return l;
}

void apply_library_facts(library_facts&& l, node_facts& f) {
  f.libibverbs = std::move(l.libibverbs);
  f.libcuda = std::move(l.libcuda);
  f.libnccl = std::move(l.libnccl);
  f.cuda_driver_version = std::move(l.cuda_driver_version);
  f.nccl_version = std::move(l.nccl_version);
}

namespace {

nlohmann::json lib_json(const result<library_fact>& l) {
  if (!l) return {{"unknown", l.error().message()}};
  return {{"requested", l->requested}, {"path", l->path}, {"version", l->version}, {"symbols", l->symbols}};
}

nlohmann::json int_json(const result<int>& v) {
  if (!v) return {{"unknown", v.error().message()}};
  return *v;
}

// o[key] as a string, "" when absent (a non-string throws json's type_error, as value(key, "") did). Not
// value(): gcc 13 at -O2 reports a null dereference inside it once inlined (Ubuntu 24.04's -Werror build).
std::string string_or_empty(const nlohmann::json& o, const char* key) {
  return o.contains(key) ? o.at(key).get<std::string>() : std::string();
}

result<library_fact> lib_from(const nlohmann::json& j, const char* key) {
  if (!j.contains(key)) return status::error("not recorded in the dump");
  const auto& v = j.at(key);
  if (!v.is_object()) return status::error(fmt::format("dump libraries.json: {} is not an object", key));
  if (v.contains("unknown")) {
    return status::error(v.at("unknown").is_string() ? v.at("unknown").get<std::string>() : "unknown");
  }
  library_fact f;
  f.requested = string_or_empty(v, "requested");
  f.path = string_or_empty(v, "path");
  f.version = string_or_empty(v, "version");
  if (v.contains("symbols") && v.at("symbols").is_object()) {
    for (const auto& [k, b] : v.at("symbols").items()) {
      if (b.is_boolean()) f.symbols[k] = b.get<bool>();
    }
  }
  return f;
}

result<int> int_from(const nlohmann::json& j, const char* key) {
  if (!j.contains(key)) return status::error("not recorded in the dump");
  const auto& v = j.at(key);
  if (v.is_number_integer()) return v.get<int>();
  if (v.is_object() && v.contains("unknown") && v.at("unknown").is_string()) {
    return status::error(v.at("unknown").get<std::string>());
  }
  return status::error(fmt::format("dump libraries.json: bad {}", key));
}

}  // namespace

nlohmann::json libraries_to_json(const node_facts& f) {
  nlohmann::json j = {{"libibverbs", lib_json(f.libibverbs)},
                      {"libcuda", lib_json(f.libcuda)},
                      {"libnccl", lib_json(f.libnccl)},
                      {"cuda_driver_version", int_json(f.cuda_driver_version)},
                      {"nccl_version", int_json(f.nccl_version)}};
  // The pid file found through slurm.conf, which the dump does not copy (it may hold AccountingStoragePass).
  if (!f.slurmd_pid_file.empty()) j["slurmd_pid_file"] = f.slurmd_pid_file;
  return j;
}

void libraries_from_json(const nlohmann::json& j, node_facts& f) {
  if (!j.is_object()) {
    f.libibverbs = f.libcuda = f.libnccl = status::error("dump libraries.json is not an object");
    f.cuda_driver_version = f.nccl_version = status::error("dump libraries.json is not an object");
    return;
  }
  f.libibverbs = lib_from(j, "libibverbs");
  f.libcuda = lib_from(j, "libcuda");
  f.libnccl = lib_from(j, "libnccl");
  f.cuda_driver_version = int_from(j, "cuda_driver_version");
  f.nccl_version = int_from(j, "nccl_version");
}

}  // namespace mrcheck
