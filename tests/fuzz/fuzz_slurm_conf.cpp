// slurm.conf as mrcheck reads it: the one reader of slurm_conf.h (read_slurm_conf_settings, includes followed
// in a private sysroot), the plugin's read_slurm_conf_facts() (in slurmstepd as root, for every task with a
// check), memlock_propagated_by(), and the same facts of the main file's text alone (slurm_conf_facts_of).
// Input: "<slurm.conf>\0<inc.conf>": both are written into a private sysroot (etc/slurm/) so Include lines can
// be followed without touching the real /etc. Inputs with ".." are skipped: they would leave the sysroot, which
// is the sysroot's business, not the parser's.
// Invariants: any text is read without a crash or a hang (include cycles are read once: finding F5); every
// file read is one of the two; the plugin's propagate_setting, problems and errors are printable; the plugin
// and the text-only view agree on whether MEMLOCK is propagated (finding F4: the plugin and the prolog were
// two readers with two rules; they now share the reader and its one value type, slurm_conf_facts).
// fuzz-requires: memlock_chain.h
// fuzz-requires: slurm_conf.h
#include "fuzz_common.h"

#include <mrcheck/slurm_conf.h>
#include <mrcheck/step.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <set>

namespace {

struct tree {
  std::filesystem::path dir;
  mrcheck::sysroot root;
  // Opened once and rewritten per input (fuzz_common.h, disk_file): the reader opens them by name as always.
  mrcheck::fuzz::disk_file conf;
  mrcheck::fuzz::disk_file inc;
};

std::filesystem::path make_tree_dir() {
  std::filesystem::path dir = mrcheck::fuzz::private_dir("/tmp/mrcheck-fuzz-slurmconf-XXXXXX");
  std::filesystem::create_directories(dir / "etc/slurm");
  return dir;
}

mrcheck::sysroot open_root(const std::filesystem::path& dir) {
  auto r = mrcheck::sysroot::open(dir);
  if (!r) mrcheck::fuzz::broken("sysroot::open failed", r.error().message());
  return *r;
}

const tree& fuzz_tree() {
  static const std::filesystem::path dir = make_tree_dir();
  static const tree t{dir, open_root(dir), mrcheck::fuzz::disk_file(dir / "etc/slurm/slurm.conf"),
                      mrcheck::fuzz::disk_file(dir / "etc/slurm/inc.conf")};
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mrcheck;
  std::string_view all = fuzz::as_text(data, size);
  if (all.find("..") != std::string_view::npos) return 0;
  std::size_t nul = all.find('\0');
  std::string_view conf = all.substr(0, nul);
  std::string_view inc = nul == std::string_view::npos ? std::string_view{} : all.substr(nul + 1);
  // The include file may hold NULs (after the input's first NUL): a NUL ends a line as in Slurm (finding F10,
  // fixed), so none reaches a problem line through an include name.
  const tree& t = fuzz_tree();
  t.conf.set(conf);
  t.inc.set(inc);

  auto settings = read_slurm_conf_settings(t.root, "/etc/slurm/slurm.conf");
  MRCHECK_FUZZ_REQUIRE(settings.is_ok(), settings.error().message());
  // Only the two files exist. A name with a NUL in it opens the file named by the part before the NUL (the
  // reader keeps the whole name, so such a file can be listed - and read - once more): compare by that part.
  std::set<std::string> opened;
  for (const auto& f : settings->files) opened.insert(f.substr(0, f.find('\0')));
  MRCHECK_FUZZ_REQUIRE(!opened.empty() && opened.size() <= 2, std::to_string(opened.size()));
  auto chain = read_slurm_conf_facts(t.root, "/etc/slurm/slurm.conf");
  if (chain) {
    MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(chain->propagate_setting), chain->propagate_setting);
    for (const auto& p : chain->problems) MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(p), p);
  } else {
    MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(chain.error().message()), chain.error().message());
  }

  slurm_conf_settings text_only;
  parse_slurm_conf_text(conf, "/etc/slurm/slurm.conf", text_only);
  auto matrix = slurm_conf_facts_of(text_only);
  for (const char* key : {"PropagateResourceLimits", "PropagateResourceLimitsExcept"}) {
    const slurm_conf_setting* s = text_only.find(key);
    if (!s) continue;
    for (bool except : {false, true}) {
      auto r = memlock_propagated_by(s->value, except);
      if (!r) MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(r.error().message()), r.error().message());
    }
  }

  // One rule in one place (finding F4): the text-only view agrees with the reader's whenever the reader
  // accepts the file and nothing came from the include.
  if (chain && inc.empty()) {
    MRCHECK_FUZZ_REQUIRE(matrix.is_ok() && chain->memlock_propagated == matrix->memlock_propagated,
                         chain->propagate_setting);
  }
  return 0;
}
