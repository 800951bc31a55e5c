// slurm.conf as mrcheck reads it: the memlock chain's read_slurm_conf() (in slurmstepd as root, for every task
// with a check) and memlock_propagated_by(), and the matrix's parse_slurm_conf() (mrcheck-prolog).
// Input: "<slurm.conf>\0<inc.conf>": both are written into a private sysroot (etc/slurm/) so Include lines can
// be followed without touching the real /etc. Inputs with ".." are skipped: they would leave the sysroot, which
// is the sysroot's business, not the parser's.
// Invariants: both readers accept any text without crashing; the chain reader's propagate_setting is printable;
// memlock_propagated_by() on any value gives a verdict or a printable error.
// MRCHECK_FUZZ_DIFFERENTIAL=1 in the environment also demands that both readers agree on whether MEMLOCK is
// propagated (they are two implementations of one Slurm rule); off by default, see README.md.
// fuzz-requires: memlock_chain.h
// fuzz-requires: matrix.h
#include "fuzz_common.h"

#include <mrcheck/matrix.h>
#include <mrcheck/memlock_chain.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace {

struct tree {
  std::filesystem::path dir;
  mrcheck::sysroot root;
};

const tree& fuzz_tree() {
  static const tree t = [] {
    char tmpl[] = "/tmp/mrcheck-fuzz-slurmconf-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) mrcheck::fuzz::broken("mkdtemp failed");
    std::filesystem::path dir(tmpl);
    std::filesystem::create_directories(dir / "etc/slurm");
    auto r = mrcheck::sysroot::open(dir);
    if (!r) mrcheck::fuzz::broken("sysroot::open failed", r.error().message());
    return tree{dir, *r};
  }();
  return t;
}

void write(const std::filesystem::path& p, std::string_view text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mrcheck;
  std::string_view all = fuzz::as_text(data, size);
  if (all.find("..") != std::string_view::npos) return 0;
  // Include cycles cost k^8 file reads for k self-including lines (README.md, finding F5): more than one
  // Include line is skipped unless MRCHECK_FUZZ_STRICT=1, so the default run does not stop at that timeout.
  if (!fuzz::strict()) {
    std::string lower(all);
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    std::size_t includes = 0;
    for (std::size_t at = lower.find("include"); at != std::string::npos; at = lower.find("include", at + 1)) ++includes;
    if (includes > 1) return 0;
  }
  std::size_t nul = all.find('\0');
  std::string_view conf = all.substr(0, nul);
  std::string_view inc = nul == std::string_view::npos ? std::string_view{} : all.substr(nul + 1);
  const tree& t = fuzz_tree();
  write(t.dir / "etc/slurm/slurm.conf", conf);
  write(t.dir / "etc/slurm/inc.conf", inc);

  // memlock_chain.h and matrix.h both declare read_slurm_conf(const sysroot&, <string>): a call with a string is
  // ambiguous when both are included, so the chain's reader is picked by its type.
  using chain_reader = result<slurm_conf_facts> (*)(const sysroot&, const std::string&);
  chain_reader read_chain_conf = &mrcheck::read_slurm_conf;
  auto chain = read_chain_conf(t.root, "/etc/slurm/slurm.conf");
  if (chain) {
    MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(chain->propagate_setting), chain->propagate_setting);
  } else {
    MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(chain.error().message()), chain.error().message());
  }

  slurm_conf_fact matrix = parse_slurm_conf(conf, "/etc/slurm/slurm.conf");
  bool matrix_propagated = matrix.memlock_propagated();
  for (const auto& v : {matrix.propagate, matrix.propagate_except}) {
    if (!v) continue;
    for (bool except : {false, true}) {
      auto r = memlock_propagated_by(*v, except);
      if (!r) MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(r.error().message()), r.error().message());
    }
  }

  static const bool differential = std::getenv("MRCHECK_FUZZ_DIFFERENTIAL") != nullptr;
  if (differential && chain && inc.empty() && conf.find_first_of("*?[\\") == std::string_view::npos) {
    MRCHECK_FUZZ_REQUIRE(chain->memlock_propagated == matrix_propagated, chain->propagate_setting);
  }
  return 0;
}
