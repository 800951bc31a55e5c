// The matrix rules file: one rule per line, "key value..." (whitespace separated), '#' to end of line is a
// comment. A file overrides the compiled-in defaults key by key, so a site file may hold one line. Every
// error names file:line; an unknown key is an error, so a typo never silently disables a rule.
#include <mrcheck/matrix.h>
#include <mrcheck/units.h>

#include <fmt/format.h>

#include <charconv>
#include <cstdint>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>

namespace mrcheck {

namespace {

constexpr std::size_t k_max_rules_file = 1 << 20;
constexpr std::size_t k_max_version_parts = 8;

std::vector<std::string_view> split_words(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

bool parse_u64(std::string_view s, std::uint64_t& out) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

std::optional<rule_action> parse_action(std::string_view s, bool allow_require) {
  if (s == "fail") return rule_action::fail;
  if (s == "warn") return rule_action::warn;
  if (s == "off") return rule_action::off;
  if (allow_require && s == "require") return rule_action::fail;
  return std::nullopt;
}

// PCI device ids as sysfs prints them: "0x2335", lower case.
std::optional<std::string> normalize_device_id(std::string_view s) {
  if (s.starts_with("0x") || s.starts_with("0X")) s.remove_prefix(2);
  if (s.empty() || s.size() > 4) return std::nullopt;
  std::string out = "0x";
  for (char c : s) {
    if (c >= '0' && c <= '9') {
      out += c;
    } else if (c >= 'a' && c <= 'f') {
      out += c;
    } else if (c >= 'A' && c <= 'F') {
      out += static_cast<char>(c - 'A' + 'a');
    } else {
      return std::nullopt;
    }
  }
  while (out.size() < 6) out.insert(2, "0");
  return out;
}

rule_action* action_field(matrix_rules& r, std::string_view key) {
  if (key == "rdma_stack") return &r.rdma_stack;
  if (key == "rdma_stack.ofed_version") return &r.rdma_stack_ofed_version;
  if (key == "hca_fw") return &r.hca_fw;
  if (key == "hca_fw.unknown_family") return &r.hca_fw_unknown;
  if (key == "gpu_driver") return &r.gpu_driver;
  if (key == "gpudirect") return &r.gpudirect;
  if (key == "cuda_driver") return &r.cuda_driver;
  if (key == "nccl") return &r.nccl;
  if (key == "bar1") return &r.bar1;
  if (key == "bar1.too_small") return &r.bar1_too_small;
  if (key == "slurmd_memlock") return &r.slurmd_memlock;
  if (key == "propagate_limits") return &r.propagate_limits;
  if (key == "max_map_count") return &r.max_map_count;
  if (key == "hugepages") return &r.hugepages;
  return nullptr;
}

class rules_parser {
 public:
  rules_parser(std::string_view file) : file_(file), rules_(default_matrix_rules()) {
    rules_.source = std::string(file);
  }

  status line(std::size_t number, std::string_view text) {
    number_ = number;
    if (auto hash = text.find('#'); hash != std::string_view::npos) text = text.substr(0, hash);
    auto words = split_words(text);
    if (words.empty()) return status::ok();
    std::string_view key = words[0];
    std::vector<std::string_view> args(words.begin() + 1, words.end());
    return apply(key, args);
  }

  matrix_rules take() { return std::move(rules_); }

 private:
  status err(std::string_view what) const { return status::error(fmt::format("{}:{}: {}", file_, number_, what)); }

  // Single-valued keys may appear once per file: two lines for the same key are a mistake (which wins?).
  status once(std::string key) {
    if (!seen_.insert(key).second) return err(fmt::format("'{}' is set twice", escape_line(key, 64)));
    return status::ok();
  }

  status want_args(std::string_view key, const std::vector<std::string_view>& args, std::size_t n,
                   std::string_view usage) const {
    if (args.size() != n) {
      return err(fmt::format("'{}' takes {} (got {} value{})", key, usage, args.size(), args.size() == 1 ? "" : "s"));
    }
    return status::ok();
  }

  status version_value(std::string_view key, std::string_view v, std::optional<dotted_version>& out) {
    if (v == "none") {
      out.reset();
      return status::ok();
    }
    auto parsed = parse_dotted_version(v);
    if (!parsed) return err(fmt::format("'{}': {}", key, parsed.error().message()));
    out = *parsed;
    return status::ok();
  }

  // One key per line; each family of keys has its handler below.
  status apply(std::string_view key, const std::vector<std::string_view>& args) {
    if (rule_action* field = action_field(rules_, key)) return action(key, args, field);
    using handler = status (rules_parser::*)(std::string_view, const std::vector<std::string_view>&);
    static constexpr std::pair<std::string_view, handler> k_handlers[] = {
        {"rdma_stack.ofed_user_marker", &rules_parser::ofed_user_marker},
        {"rdma_stack.uverbs_abi", &rules_parser::uverbs_abi},
        {"hca_family", &rules_parser::hca_family},
        {"hca_fw.min", &rules_parser::hca_fw_min},
        {"gpu_driver.min", &rules_parser::driver_version_min},
        {"cuda_driver.min", &rules_parser::driver_version_min},
        {"nccl.min", &rules_parser::driver_version_min},
        {"gpudirect.dmabuf_kernel_min", &rules_parser::dmabuf_min},
        {"gpudirect.dmabuf_cuda_min", &rules_parser::dmabuf_min},
        {"gpu_driver.flavour", &rules_parser::gpu_driver_flavour},
        {"gpu_memory", &rules_parser::gpu_memory},
        {"slurmd_memlock.min", &rules_parser::slurmd_memlock_min},
        {"bar1.min", &rules_parser::bar1_min},
        {"max_map_count.min", &rules_parser::max_map_count},
        {"max_map_count.recommended", &rules_parser::max_map_count},
        {"hugepages.reserved_max", &rules_parser::hugepages_reserved},
        {"hugepages.reserved_warn", &rules_parser::hugepages_reserved},
        {"hugepages.free_min", &rules_parser::hugepages_free_min},
    };
    for (const auto& [k, h] : k_handlers) {
      if (k == key) return (this->*h)(key, args);
    }
    return err(fmt::format("unknown rule key '{}'", escape_line(key, 64)));
  }

  status action(std::string_view key, const std::vector<std::string_view>& args, rule_action* field) {
    if (auto s = want_args(key, args, 1, key == "gpudirect" ? "require|warn|off" : "fail|warn|off"); !s) return s;
    auto a = parse_action(args[0], key == "gpudirect");
    if (!a) return err(fmt::format("'{}': '{}' is not fail, warn or off", key, escape_line(args[0], 32)));
    if (auto s = once(std::string(key)); !s) return s;
    *field = *a;
    return status::ok();
  }

  status ofed_user_marker(std::string_view key, const std::vector<std::string_view>& args) {
    if (args.empty()) return err("'rdma_stack.ofed_user_marker' takes one or more words");
    if (auto s = once(std::string(key)); !s) return s;
    rules_.ofed_user_markers.assign(args.begin(), args.end());
    return status::ok();
  }

  status uverbs_abi(std::string_view key, const std::vector<std::string_view>& args) {
    if (args.empty()) return err("'rdma_stack.uverbs_abi' takes one or more ABI numbers");
    if (auto s = once(std::string(key)); !s) return s;
    rules_.uverbs_abi.clear();
    for (auto a : args) {
      std::uint64_t n = 0;
      if (!parse_u64(a, n) || n > 1000) return err(fmt::format("'{}' is not a uverbs ABI number", escape_line(a, 32)));
      rules_.uverbs_abi.push_back(static_cast<int>(n));
    }
    return status::ok();
  }

  status hca_family(std::string_view /*key*/, const std::vector<std::string_view>& args) {
    if (args.size() != 2) return err("'hca_family' takes MAJOR NAME (e.g. hca_family 28 ConnectX-7)");
    std::uint64_t major = 0;
    if (!parse_u64(args[0], major) || major > 65535) {
      return err(fmt::format("'{}' is not a firmware major number", escape_line(args[0], 32)));
    }
    if (auto s = once(fmt::format("hca_family {}", major)); !s) return s;
    rules_.hca_families[major].name = std::string(args[1]);
    return status::ok();
  }

  status hca_fw_min(std::string_view key, const std::vector<std::string_view>& args) {
    if (args.size() != 2) return err("'hca_fw.min' takes MAJOR VERSION|none (e.g. hca_fw.min 28 28.39.1002)");
    std::uint64_t major = 0;
    if (!parse_u64(args[0], major))
      return err(fmt::format("'{}' is not a firmware major number", escape_line(args[0], 32)));
    auto it = rules_.hca_families.find(major);
    if (it == rules_.hca_families.end())
      return err(fmt::format("'hca_fw.min {}': no hca_family {} declared", major, major));
    if (auto s = once(fmt::format("hca_fw.min {}", major)); !s) return s;
    if (auto s = version_value(key, args[1], it->second.min); !s) return s;
    if (it->second.min && it->second.min->parts.front() != major) {
      return err(fmt::format("'hca_fw.min {}': version {} belongs to major {}", major, it->second.min->to_string(),
                             it->second.min->parts.front()));
    }
    return status::ok();
  }

  status driver_version_min(std::string_view key, const std::vector<std::string_view>& args) {
    if (auto s = want_args(key, args, 1, "VERSION|none"); !s) return s;
    if (auto s = once(std::string(key)); !s) return s;
    auto& field = key == "gpu_driver.min"    ? rules_.gpu_driver_min
                  : key == "cuda_driver.min" ? rules_.cuda_driver_min
                                             : rules_.nccl_min;
    return version_value(key, args[0], field);
  }

  status dmabuf_min(std::string_view key, const std::vector<std::string_view>& args) {
    if (auto s = want_args(key, args, 1, "VERSION"); !s) return s;
    if (auto s = once(std::string(key)); !s) return s;
    auto v = parse_dotted_version(args[0]);
    if (!v) return err(fmt::format("'{}': {}", key, v.error().message()));
    (key == "gpudirect.dmabuf_kernel_min" ? rules_.dmabuf_kernel_min : rules_.dmabuf_cuda_min) = *v;
    return status::ok();
  }

  status gpu_driver_flavour(std::string_view key, const std::vector<std::string_view>& args) {
    if (auto s = want_args(key, args, 1, "any|open|proprietary"); !s) return s;
    if (auto s = once(std::string(key)); !s) return s;
    if (args[0] == "any") {
      rules_.gpu_driver_flavour = flavour_rule::any;
    } else if (args[0] == "open") {
      rules_.gpu_driver_flavour = flavour_rule::open;
    } else if (args[0] == "proprietary") {
      rules_.gpu_driver_flavour = flavour_rule::proprietary;
    } else {
      return err(fmt::format("'gpu_driver.flavour': '{}' is not any, open or proprietary", escape_line(args[0], 32)));
    }
    return status::ok();
  }

  status gpu_memory(std::string_view /*key*/, const std::vector<std::string_view>& args) {
    if (args.size() < 2) return err("'gpu_memory' takes DEVICE_ID SIZE [name...] (e.g. gpu_memory 0x2335 141G H200)");
    auto id = normalize_device_id(args[0]);
    if (!id) return err(fmt::format("'{}' is not a PCI device id (4 hex digits)", escape_line(args[0], 32)));
    auto size = parse_bytes(args[1]);
    if (!size || *size == 0 || *size == k_unlimited) {
      return err(fmt::format("'gpu_memory {}': '{}' is not a memory size", *id, escape_line(args[1], 32)));
    }
    if (auto s = once("gpu_memory " + *id); !s) return s;
    rules_.gpu_memory[*id] = *size;
    return status::ok();
  }

  status slurmd_memlock_min(std::string_view key, const std::vector<std::string_view>& args) {
    if (auto s = want_args(key, args, 1, "SIZE|unlimited"); !s) return s;
    if (auto s = once(std::string(key)); !s) return s;
    if (args[0] == "unlimited" || args[0] == "infinity") {
      rules_.slurmd_memlock_min = k_unlimited;
      return status::ok();
    }
    auto size = parse_bytes(args[0]);
    if (!size) return err(fmt::format("'slurmd_memlock.min': {}", size.error().message()));
    rules_.slurmd_memlock_min = *size;
    return status::ok();
  }

  status bar1_min(std::string_view key, const std::vector<std::string_view>& args) {
    if (auto s = want_args(key, args, 1, "auto|SIZE"); !s) return s;
    if (auto s = once(std::string(key)); !s) return s;
    if (args[0] == "auto") {
      rules_.bar1_min.reset();
      return status::ok();
    }
    auto size = parse_bytes(args[0]);
    if (!size || *size == k_unlimited) {
      return err(fmt::format("'bar1.min': '{}' is not a size (or 'auto')", escape_line(args[0], 32)));
    }
    rules_.bar1_min = *size;
    return status::ok();
  }

  status max_map_count(std::string_view key, const std::vector<std::string_view>& args) {
    if (auto s = want_args(key, args, 1, "COUNT|none"); !s) return s;
    if (auto s = once(std::string(key)); !s) return s;
    auto& field = key == "max_map_count.min" ? rules_.max_map_count_min : rules_.max_map_count_recommended;
    if (args[0] == "none") {
      field.reset();
      return status::ok();
    }
    std::uint64_t n = 0;
    // The sysctl is an int (mm/util.c sysctl_max_map_count).
    if (!parse_u64(args[0], n) || n > INT32_MAX) {
      return err(fmt::format("'{}': '{}' is not a map count (0 to {})", key, escape_line(args[0], 32), INT32_MAX));
    }
    field = n;
    return status::ok();
  }

  status hugepages_reserved(std::string_view key, const std::vector<std::string_view>& args) {
    if (auto s = want_args(key, args, 1, "PERCENT%|none"); !s) return s;
    if (auto s = once(std::string(key)); !s) return s;
    auto& field = key == "hugepages.reserved_max" ? rules_.hugepages_reserved_max_pct
                                                  : rules_.hugepages_reserved_warn_pct;
    if (args[0] == "none") {
      field.reset();
      return status::ok();
    }
    std::string_view v = args[0];
    std::uint64_t n = 0;
    // The '%' is required: a bare number here reads like a size or a page count.
    if (!v.ends_with('%') || !parse_u64(v.substr(0, v.size() - 1), n) || n > 100) {
      return err(fmt::format("'{}': '{}' is not a percentage of MemTotal (0% to 100%)", key, escape_line(v, 32)));
    }
    field = n;
    return status::ok();
  }

  status hugepages_free_min(std::string_view key, const std::vector<std::string_view>& args) {
    if (auto s = want_args(key, args, 1, "PAGES"); !s) return s;
    if (auto s = once(std::string(key)); !s) return s;
    std::uint64_t n = 0;
    if (!parse_u64(args[0], n))
      return err(fmt::format("'{}': '{}' is not a page count", key, escape_line(args[0], 32)));
    rules_.hugepages_free_min = n;
    return status::ok();
  }

  std::string_view file_;
  std::size_t number_ = 0;
  matrix_rules rules_;
  std::set<std::string> seen_;
};

}  // namespace

std::string dotted_version::to_string() const {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) out += '.';
    out += std::to_string(parts[i]);
  }
  return out;
}

result<dotted_version> parse_dotted_version(std::string_view text) {
  dotted_version v;
  std::size_t pos = 0;
  if (text.empty()) return status::error("empty version");
  while (true) {
    std::size_t dot = text.find('.', pos);
    std::string_view part = text.substr(pos, dot == std::string_view::npos ? std::string_view::npos : dot - pos);
    std::uint64_t n = 0;
    if (!parse_u64(part, n) || part.size() > 12) {
      return status::error(fmt::format("'{}' is not a dotted version (digits and dots)", escape_line(text, 64)));
    }
    v.parts.push_back(n);
    if (v.parts.size() > k_max_version_parts) {
      return status::error(fmt::format("'{}' has too many components", escape_line(text, 64)));
    }
    if (dot == std::string_view::npos) break;
    pos = dot + 1;
  }
  return v;
}

dotted_version cuda_version_from_int(int v) {
  auto [x, y] = cuda_version_parts(v);
  return dotted_version{{static_cast<std::uint64_t>(x), static_cast<std::uint64_t>(y)}};
}

dotted_version nccl_version_from_int(int v) {
  auto [x, y, z] = nccl_version_parts(v);
  return dotted_version{{static_cast<std::uint64_t>(x), static_cast<std::uint64_t>(y), static_cast<std::uint64_t>(z)}};
}

std::string_view to_string(rule_action a) {
  switch (a) {
    case rule_action::fail: return "fail";
    case rule_action::warn: return "warn";
    case rule_action::off: return "off";
  }
  return "fail";
}

matrix_rules default_matrix_rules() {
  matrix_rules r;
  // Families by firmware major (docs/facts/kernel-and-drivers.md §2, MFT "Supported Adapter Cards Firmware Versions");
  // minimums are the "Additional Firmware Rev. Supported" column of MFT 4.22.1 LTS (etc/README.rules.md has the URLs).
  auto fam = [&](std::uint64_t major, const char* name, const char* min) {
    r.hca_families[major] = hca_family_rule{name, parse_dotted_version(min).value()};
  };
  fam(12, "ConnectX-4", "12.28.2006");
  fam(14, "ConnectX-4Lx", "14.32.1010");
  fam(16, "ConnectX-5", "16.35.1012");
  fam(20, "ConnectX-6", "20.35.1012");
  fam(22, "ConnectX-6Dx", "22.35.1012");
  fam(24, "BlueField-2/3", "24.35.1012");
  fam(26, "ConnectX-6Lx", "26.35.1012");
  fam(28, "ConnectX-7", "28.35.1012");
  r.gpu_driver_min = dotted_version{{525}};
  r.cuda_driver_min = dotted_version{{12, 0}};
  r.nccl_min = dotted_version{{2, 12, 0}};
  constexpr std::uint64_t gib = std::uint64_t{1} << 30;
  r.gpu_memory["0x20b2"] = 80 * gib;   // A100 SXM4 80GB
  r.gpu_memory["0x20b5"] = 80 * gib;   // A100 PCIe 80GB
  r.gpu_memory["0x2330"] = 80 * gib;   // H100 SXM5 80GB
  r.gpu_memory["0x2331"] = 80 * gib;   // H100 PCIe
  r.gpu_memory["0x2335"] = 141 * gib;  // H200 SXM 141GB
  return r;
}

result<matrix_rules> parse_matrix_rules(std::string_view text, std::string_view file) {
  rules_parser p(file);
  std::size_t pos = 0;
  std::size_t number = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    if (auto s = p.line(++number, line); !s) return s;
  }
  matrix_rules r = p.take();
  std::uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64: which rules judged a run, for the stack history
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ULL;
  r.hash = fmt::format("{:016x}", h);
  // Thresholds of one check that contradict each other (from any lines of the file, or a file line against
  // a default): the warning band would be empty or inverted, which is never what was meant.
  if (r.max_map_count_min && r.max_map_count_recommended && *r.max_map_count_min > *r.max_map_count_recommended) {
    return status::error(fmt::format("{}: max_map_count.min {} is above max_map_count.recommended {}", file,
                                     *r.max_map_count_min, *r.max_map_count_recommended));
  }
  if (r.hugepages_reserved_max_pct && r.hugepages_reserved_warn_pct &&
      *r.hugepages_reserved_warn_pct > *r.hugepages_reserved_max_pct) {
    return status::error(fmt::format("{}: hugepages.reserved_warn {}% is above hugepages.reserved_max {}%", file,
                                     *r.hugepages_reserved_warn_pct, *r.hugepages_reserved_max_pct));
  }
  return r;
}

result<matrix_rules> load_matrix_rules(const std::string& path) {
  std::error_code ec;
  auto st = std::filesystem::status(path, ec);
  if (ec) return status::from_errno(fmt::format("read rules {}", path), ec.value());
  if (!std::filesystem::is_regular_file(st))
    return status::error(fmt::format("read rules {}: not a regular file", path));
  auto size = std::filesystem::file_size(path, ec);
  if (ec) return status::from_errno(fmt::format("read rules {}", path), ec.value());
  if (size > k_max_rules_file) return status::error(fmt::format("read rules {}: larger than 1 MiB", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) return status::from_errno(fmt::format("read rules {}", path), errno);
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_matrix_rules(ss.str(), path);
}

result<matrix_rules> load_matrix_rules_or_default(const std::string& path) {
  if (!path.empty()) return load_matrix_rules(path);
  std::error_code ec;
  std::string def(k_default_rules_path);
  if (std::filesystem::exists(def, ec)) return load_matrix_rules(def);
  return default_matrix_rules();
}

}  // namespace mrcheck
