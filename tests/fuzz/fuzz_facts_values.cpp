// The small parsers behind the node facts, all fed the same bytes (a fixture tree or a `mrcheck dump` from
// another node is just files someone wrote): /proc/PID/status (Uid), /proc/meminfo, /proc/driver/nvidia/version,
// /sys/bus/pci/devices/BDF/resource (+ find_bar1), slurmd's pid file, SlurmdPidFile= in slurm.conf, library
// version from a file name.
// Invariants: BAR1 is one of the six standard BARs and a prefetchable memory resource of non-zero size; a pid is
// in 1..2^30; the nvidia version is digits and dots and the raw line is escaped and bounded; sizes in kB are
// whole KiB; a version from a library name is digits and dots; errors are printable lines.
#include "fuzz_common.h"

#include <mrcheck/facts.h>

#include <algorithm>

namespace {

bool digits_and_dots(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == '.' || (c >= '0' && c <= '9'); });
}

template <class R>
void printable_error(const R& r) {
  if (!r) MRCHECK_FUZZ_REQUIRE(mrcheck::fuzz::printable_ascii(r.error().message()), r.error().message());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mrcheck;
  std::string_view text = fuzz::as_text(data, size);

  printable_error(parse_status_uid(text));

  auto mem = parse_meminfo(text);
  printable_error(mem);
  if (mem) {
    MRCHECK_FUZZ_REQUIRE(mem->mem_total % 1024 == 0 && mem->mem_available % 1024 == 0 && mem->page_size % 1024 == 0,
                         text);
  }

  auto nv = parse_nvidia_version(text);
  printable_error(nv);
  if (nv) {
    MRCHECK_FUZZ_REQUIRE(!nv->version.empty() && digits_and_dots(nv->version), nv->version);
    MRCHECK_FUZZ_REQUIRE(nv->raw.size() <= 200 && fuzz::printable_ascii(nv->raw), nv->raw);
  }

  auto res = parse_pci_resources(text);
  printable_error(res);
  if (res) {
    MRCHECK_FUZZ_REQUIRE(!res->empty() && res->size() <= 64, text);
    int bar = find_bar1(*res);
    MRCHECK_FUZZ_REQUIRE(bar >= -1 && bar < 6, text);
    if (bar >= 0) {
      const auto& b = (*res)[static_cast<std::size_t>(bar)];
      constexpr std::uint64_t pref = k_ioresource_mem | k_ioresource_prefetch;
      MRCHECK_FUZZ_REQUIRE(b.size() > 0 && (b.flags & pref) == pref, text);
      for (std::size_t i = 0; i < std::min<std::size_t>(res->size(), 6); ++i) {
        const auto& o = (*res)[i];
        bool candidate = o.size() > 0 && (o.flags & pref) == pref &&
                         ((o.flags & k_ioresource_mem_64) || !(b.flags & k_ioresource_mem_64));
        // No prefetchable BAR of the same class is larger than the one chosen.
        if (candidate) MRCHECK_FUZZ_REQUIRE(o.size() <= b.size(), text);
      }
    }
  }

  auto pid = parse_pid_file(text);
  printable_error(pid);
  if (pid) MRCHECK_FUZZ_REQUIRE(*pid > 0 && *pid <= 0x3fffffff, text);

  std::string v = library_version_from_path(text);
  MRCHECK_FUZZ_REQUIRE(digits_and_dots(v), v);
  return 0;
}
