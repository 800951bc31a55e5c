// The job's NCCL (include/mrcheck/job_nccl.h): found in virtualenv-shaped trees holding a second libnccl (a fake
// built by the tests, tests/unit/fake_libnccl.c), read from the ELF file without loading it, and broken or
// hostile libraries (a symlink loop, 0 bytes, a FIFO, one that crashes in ncclGetVersion) give a verdict, never
// a hang, and are not loaded as root unless root owns them.
#include <mrcheck/child.h>
#include <mrcheck/job_nccl.h>
#include <mrcheck/matrix.h>

#include "checks/matrix_checks.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace mrcheck {
namespace {

namespace fs = std::filesystem;

const std::string k_mrcheck = std::string(MRCHECK_BINARY_DIR) + "/cli/mrcheck";
const std::string k_fake = MRCHECK_FAKE_LIBNCCL;
const std::string k_fake_crash = MRCHECK_FAKE_LIBNCCL_CRASH;
const std::string k_fake_unresolved = MRCHECK_FAKE_LIBNCCL_UNRESOLVED;
const std::string k_fake_net = MRCHECK_FAKE_LIBNCCL_NET;
#if defined(__SANITIZE_ADDRESS__)
constexpr bool k_sanitized = true;
#elif defined(__has_feature)
constexpr bool k_sanitized = __has_feature(address_sanitizer);
#else
constexpr bool k_sanitized = false;
#endif

class job_nccl_tree : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mrcheck-jobnccl-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ::chmod(dir_.c_str(), 0755);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& rel) const { return dir_ + "/" + rel; }
  std::string put(const std::string& rel, const std::string& from) {
    fs::create_directories(fs::path(path(rel)).parent_path());
    fs::copy_file(from, path(rel), fs::copy_options::overwrite_existing);
    return path(rel);
  }
  void write(const std::string& rel, const std::string& text, fs::perms mode = fs::perms(0644)) {
    fs::create_directories(fs::path(path(rel)).parent_path());
    std::ofstream(path(rel)) << text;
    fs::permissions(path(rel), mode);
  }
  // A venv as `python3 -m venv` lays it out, with torch and the nvidia-nccl wheel in its site-packages.
  std::string make_venv(const std::string& name, const std::string& lib = k_fake) {
    write(name + "/pyvenv.cfg", "home = /usr/bin\ninclude-system-site-packages = false\n");
    write(name + "/bin/python3", "", fs::perms(0755));
    fs::create_directories(path(name + "/lib/python3.11/site-packages/torch"));
    put(name + "/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2", lib);
    return path(name);
  }
  job_nccl find(std::vector<std::string> argv, std::vector<std::string> env) {
    job_nccl_inputs in;
    in.argv = std::move(argv);
    in.env = std::move(env);
    // An empty root: the host's ld.so.cache stays out of the expectations (its NCCL, if any, is another test's).
    auto r = sysroot::open(path("root"));
    if (!r) {
      fs::create_directories(path("root"));
      r = sysroot::open(path("root"));
    }
    in.root = *r;
    job_nccl j = find_job_nccl(in);
    // The host's own NCCL (its default directories, /usr/local/cuda) is not part of these trees.
    std::erase_if(j.found, [&](const nccl_candidate& c) { return !c.path.starts_with(dir_); });
    return j;
  }
  std::string dir_;
};

TEST_F(job_nccl_tree, reads_version_and_symbols_from_the_elf_without_loading) {
  auto i = scan_nccl_library(k_fake);
  ASSERT_TRUE(i.is_ok()) << i.error().message();
  EXPECT_EQ(i->version, "2.99.1+cuda12.4");
  EXPECT_EQ(i->version_code, 29901);
  EXPECT_TRUE(i->has_get_version);
  EXPECT_TRUE(i->abi.empty());
  auto n = scan_nccl_library(k_fake_net);
  ASSERT_TRUE(n.is_ok()) << n.error().message();
  EXPECT_EQ(n->abi, (std::vector<std::string>{"ncclNetPlugin_v8", "ncclNetPlugin_v9"}));
  EXPECT_FALSE(n->has_get_version);
  EXPECT_EQ(nccl_version_code("2.28.3"), 22803);
  EXPECT_EQ(nccl_version_code("2.x"), 0);
}

TEST_F(job_nccl_tree, broken_files_are_named_and_nothing_blocks) {
  fs::create_symlink("loop-b", path("loop-a"));
  fs::create_symlink("loop-a", path("loop-b"));
  write("empty.so", "");
  write("text.so", "not a library\n");
  ASSERT_EQ(::mkfifo(path("fifo.so").c_str(), 0644), 0);  // open(O_RDONLY) without O_NONBLOCK would block here
  auto loop = scan_nccl_library(path("loop-a"));
  ASSERT_FALSE(loop.is_ok());
  EXPECT_NE(loop.error().message().find("symbolic link loop"), std::string::npos) << loop.error().message();
  auto empty = scan_nccl_library(path("empty.so"));
  ASSERT_FALSE(empty.is_ok());
  EXPECT_NE(empty.error().message().find("0-byte"), std::string::npos);
  auto text = scan_nccl_library(path("text.so"));
  ASSERT_FALSE(text.is_ok());
  EXPECT_NE(text.error().message().find("not an ELF"), std::string::npos);
  auto fifo = scan_nccl_library(path("fifo.so"));
  ASSERT_FALSE(fifo.is_ok());
  EXPECT_NE(fifo.error().message().find("not a regular file"), std::string::npos);
  auto missing = scan_nccl_library(path("nope.so"));
  EXPECT_FALSE(missing.is_ok());
  // A library of another machine (a venv made on an aarch64 node, here a RISC-V one: e_machine 243 at offset 18),
  // which glibc's dlopen calls "No such file or directory".
  std::string other = put("riscv/libnccl.so.2", k_fake);
  {
    std::fstream f(other, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(18);
    f.write("\xf3\x00", 2);
  }
  auto arch = scan_nccl_library(other);
  ASSERT_FALSE(arch.is_ok());
  EXPECT_NE(arch.error().message().find("built for riscv64, this node is "), std::string::npos)
      << arch.error().message();
}

TEST_F(job_nccl_tree, a_python_job_in_a_venv_loads_the_wheel_beside_torch) {
  std::string v = make_venv("venv");
  // A second NCCL in the CUDA toolkit: listed, not on the job's load path.
  put("cuda/lib64/libnccl.so.2", k_fake);
  auto j = find({"python3", "train.py"},
                {"PATH=" + v + "/bin:/usr/bin:/bin", "VIRTUAL_ENV=" + v, "CUDA_HOME=" + path("cuda")});
  ASSERT_EQ(j.chosen, 0);
  const nccl_candidate& c = j.found.at(0);
  EXPECT_EQ(c.path, v + "/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2");
  EXPECT_NE(c.origin.find("nvidia-nccl wheel (venv " + v), std::string::npos) << c.origin;
  EXPECT_NE(j.why.find("torch"), std::string::npos) << j.why;
  EXPECT_EQ(c.info.is_ok() ? c.info.value().version : c.info.error().message(), "2.99.1+cuda12.4");
  EXPECT_EQ(j.python, v + "/bin/python3");
  ASSERT_EQ(j.found.size(), 2u);
  EXPECT_FALSE(j.found[1].loadable);
  EXPECT_NE(job_nccl_summary(j).find("NCCL 2.99.1+cuda12.4"), std::string::npos) << job_nccl_summary(j);
  auto lines = job_nccl_lines(j);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("<- the job's"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("not on the job's load path"), std::string::npos) << lines[1];
}

TEST_F(job_nccl_tree, ld_library_path_comes_before_a_wheel_without_torch_and_a_script_names_its_python) {
  std::string v = make_venv("venv");
  fs::remove(path("venv/lib/python3.11/site-packages/torch"));
  put("ld/libnccl.so.2", k_fake);
  write("venv/bin/torchrun", "#!/usr/bin/env python3\nimport sys\n", fs::perms(0755));
  auto j = find({"torchrun", "--nproc-per-node=8", "train.py"},
                {"PATH=" + v + "/bin:/usr/bin", "LD_LIBRARY_PATH=relative:" + path("ld"), "HOME=/nonexistent"});
  ASSERT_EQ(j.chosen, 0);
  EXPECT_EQ(j.found.at(0).path, path("ld/libnccl.so.2"));
  EXPECT_EQ(j.found.at(0).origin, "LD_LIBRARY_PATH");
  EXPECT_EQ(j.python, v + "/bin/python3");  // from the script's "#!/usr/bin/env python3", through PATH
  ASSERT_EQ(j.found.size(), 2u);            // the wheel is still listed
  EXPECT_TRUE(j.found[1].loadable);
}

// torch maps the wheel beside it even with another libnccl.so.2 first in LD_LIBRARY_PATH (measured with torch
// 2.11 on the GPU machine, docs/job-nccl.md).
TEST_F(job_nccl_tree, torchs_wheel_wins_over_ld_library_path) {
  std::string v = make_venv("venv");
  put("ld/libnccl.so.2", k_fake);
  auto j = find({"python3", "train.py"}, {"PATH=" + v + "/bin:/usr/bin", "LD_LIBRARY_PATH=" + path("ld")});
  ASSERT_EQ(j.chosen, 0);
  EXPECT_EQ(j.found.at(0).path, v + "/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2");
  ASSERT_EQ(j.found.size(), 2u);
  EXPECT_EQ(j.found.at(1).origin, "LD_LIBRARY_PATH");
}

TEST_F(job_nccl_tree, net_plugin_and_its_abi) {
  put("ld/libnccl.so.2", k_fake);
  put("ld/libnccl-net-fake.so", k_fake_net);
  auto j = find({"/bin/true"}, {"LD_LIBRARY_PATH=" + path("ld"), "NCCL_NET_PLUGIN=fake"});
  ASSERT_EQ(j.plugins.size(), 1u);
  EXPECT_EQ(j.plugins[0].path, path("ld/libnccl-net-fake.so"));
  ASSERT_TRUE(j.plugins[0].info.is_ok());
  EXPECT_EQ(j.plugins[0].info->abi.back(), "ncclNetPlugin_v9");
  auto js = job_nccl_json(j);
  EXPECT_EQ(js.at("plugins").at(0).at("abi").size(), 2u);
  auto missing = find({"/bin/true"}, {"LD_LIBRARY_PATH=" + path("ld"), "NCCL_NET_PLUGIN=absent"});
  ASSERT_EQ(missing.plugins.size(), 1u);
  EXPECT_TRUE(missing.plugins[0].path.empty());
}

TEST_F(job_nccl_tree, job_settings_reach_the_probe_as_mrcheck_job_variables) {
  auto env = job_nccl_env_for_probe({"python3", "x.py"}, {"LD_LIBRARY_PATH=/a", "VIRTUAL_ENV=/v", "SECRET=1"});
  EXPECT_EQ(env, (std::vector<std::string>{"MRCHECK_JOB_ARGV0=python3", "MRCHECK_JOB_LD_LIBRARY_PATH=/a",
                                           "MRCHECK_JOB_VIRTUAL_ENV=/v"}));
  env.push_back("HOME=/home/u");
  env.push_back("LD_LIBRARY_PATH=/not-the-job");
  auto in = job_nccl_inputs_from_env(env);
  EXPECT_EQ(in.argv, std::vector<std::string>{"python3"});
  EXPECT_EQ(in.env, (std::vector<std::string>{"HOME=/home/u", "LD_LIBRARY_PATH=/a", "VIRTUAL_ENV=/v"}));
}

TEST(job_nccl_cache, finds_libc_in_this_machines_ld_so_cache) {
  auto read = sysroot().read("/etc/ld.so.cache", 64 << 20);
  if (!read) GTEST_SKIP() << "no /etc/ld.so.cache";
  std::string cache = *read;
  std::string libc = ld_cache_lookup(cache, "libc.so.6");
  ASSERT_FALSE(libc.empty());
  EXPECT_TRUE(fs::exists(libc)) << libc;
  EXPECT_EQ(ld_cache_lookup(cache, "libmrcheck-none.so.9"), "");
  EXPECT_EQ(ld_cache_lookup(cache.substr(0, 30), "libc.so.6"), "");  // truncated: nothing, no overread
}

// An LD_LIBRARY_PATH directory whose name is not UTF-8 (a byte 0xff): `probe nccl --json` used to die in
// nlohmann's dump (type_error 316, exit by std::terminate); now the name's bad bytes are replaced and the JSON
// parses, with the verdict about the job's library in it.
TEST_F(job_nccl_tree, probe_json_survives_a_library_dir_name_that_is_not_utf8) {
  if (!fs::exists(k_mrcheck)) GTEST_SKIP() << "build the mrcheck target first";
  std::string odd = "bad\xff\xfe";
  write(odd + "/libnccl.so.2", "");
  child_spec s;
  s.argv = {k_mrcheck, "probe", "nccl", "--mode", "local-pair", "--json", "--timeout", "20s"};
  s.env = {"PATH=/usr/bin:/bin", "LD_LIBRARY_PATH=" + path(odd)};
  s.timeout = std::chrono::seconds(30);
  auto o = run_child(s);
  ASSERT_TRUE(o.is_ok());
  EXPECT_FALSE(o->signaled) << o->err;
  EXPECT_EQ(o->exit_code, 1) << o->out << o->err;
  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(o->out)) << o->out << o->err;
  std::string lib = j.at("job_nccl").at("job_library");
  EXPECT_NE(lib.find("libnccl.so.2"), std::string::npos) << lib;
  EXPECT_EQ(lib.find('\xff'), std::string::npos) << lib;
}

// `mrcheck probe nccl` with the job's broken NCCL: a verdict that names it, before any rank loads anything.
TEST_F(job_nccl_tree, probe_gives_a_verdict_for_a_broken_or_crashing_job_nccl) {
  if (!fs::exists(k_mrcheck)) GTEST_SKIP() << "build the mrcheck target first";
  write("bad/libnccl.so.2", "");
  child_spec s;
  s.argv = {k_mrcheck, "probe", "nccl", "--mode", "local-pair", "--json", "--timeout", "20s"};
  s.env = {"PATH=/usr/bin:/bin", "LD_LIBRARY_PATH=" + path("bad")};
  s.timeout = std::chrono::seconds(30);
  auto o = run_child(s);
  ASSERT_TRUE(o.is_ok());
  EXPECT_EQ(o->exit_code, 1) << o->out << o->err;
  auto j = nlohmann::json::parse(o->out);
  EXPECT_EQ(j.at("checks").size(), 1u);
  std::string summary = j.at("checks").at(0).at("summary");
  EXPECT_NE(summary.find("0-byte"), std::string::npos) << summary;
  EXPECT_EQ(j.at("job_nccl").at("job_library"), path("bad/libnccl.so.2"));
  EXPECT_FALSE(j.contains("ranks"));  // nothing ran

  // One that crashes in ncclGetVersion: the rank dies in "load", the verdict says so, nothing hangs.
  std::string crash = put("crash/libnccl.so.2", k_fake_crash);
  s.argv = {k_mrcheck, "probe", "nccl", "--mode", "local-pair", "--json", "--timeout", "20s", "--nccl-library", crash};
  s.env = {"PATH=/usr/bin:/bin"};
  o = run_child(s);
  ASSERT_TRUE(o.is_ok());
  EXPECT_FALSE(o->timed_out);
  EXPECT_EQ(o->exit_code, 1) << o->out << o->err;
  j = nlohmann::json::parse(o->out);
  summary = j.at("checks").at(0).at("summary");
  EXPECT_NE(summary.find("in loading CUDA/NCCL"), std::string::npos) << summary;
  // Under AddressSanitizer (scripts/test.sh's sanitizer pass) the rank's own SEGV handler reports the crash and
  // exits 1 instead of dying by the signal.
  if (!k_sanitized) {
    EXPECT_NE(summary.find("SIGSEGV"), std::string::npos) << summary;
  }

  // A good second NCCL: its version is read in the rank (as this user), before CUDA is even looked for.
  std::string good = put("good/libnccl.so.2", k_fake);
  s.argv = {k_mrcheck, "probe", "nccl", "--mode", "local-pair", "--json", "--timeout", "20s", "--nccl-library", good};
  o = run_child(s);
  ASSERT_TRUE(o.is_ok());
  j = nlohmann::json::parse(o->out);
  ASSERT_TRUE(j.contains("ranks")) << o->out;
  EXPECT_EQ(j.at("ranks").at(0).at("report").at("nccl_version"), 29901) << o->out;
  // The report names the file, as root too, where the ranks load it through a descriptor (/proc/PID/fd/N, which
  // names nothing once the probe has exited).
  EXPECT_EQ(j.at("nccl_library"), good) << o->out;
  EXPECT_EQ(j.at("ranks").at(0).at("report").at("nccl_library"), good) << o->out;

  // One the loader refuses (a symbol nothing defines): the rank's dlopen error, and so the verdict, name the file;
  // as root they said "dlopen /proc/PID/fd/N: /proc/PID/fd/N: undefined symbol: ...".
  std::string refused = put("refused/libnccl.so.2", k_fake_unresolved);
  child_spec r = s;
  r.argv = {k_mrcheck, "probe",     "nccl", "--mode",         "local-pair",
            "--json",  "--timeout", "20s",  "--nccl-library", refused};
  o = run_child(r);
  ASSERT_TRUE(o.is_ok());
  j = nlohmann::json::parse(o->out);
  summary = j.at("checks").at(0).at("summary");
  EXPECT_NE(summary.find("dlopen " + refused + ": "), std::string::npos) << summary;
  EXPECT_EQ(summary.find("/proc/"), std::string::npos) << summary;
  ASSERT_TRUE(j.contains("ranks")) << o->out;
  std::string error = j.at("ranks").at(0).at("report").at("error");
  EXPECT_NE(error.find("undefined symbol: mrcheck_fake_nccl_nowhere"), std::string::npos) << error;
  EXPECT_EQ(error.find("/proc/"), std::string::npos) << error;

  // As root, a library another user owns is not loaded at all.
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(good.c_str(), 65534, 65534), 0);
    o = run_child(s);
    ASSERT_TRUE(o.is_ok());
    j = nlohmann::json::parse(o->out);
    summary = j.at("checks").at(0).at("summary");
    EXPECT_NE(summary.find("not loaded as root"), std::string::npos) << summary;
    EXPECT_FALSE(j.contains("ranks"));

    // B4: root's library in a directory a user owns (who can swap it, or a link to it, between check and load) is
    // refused too; the old check looked at the file alone and loaded it later by path.
    std::string swap = put("user/libnccl.so.2", k_fake);
    ASSERT_EQ(::chown(path("user").c_str(), 65534, 65534), 0);
    s.argv = {k_mrcheck, "probe", "nccl", "--mode", "local-pair", "--json", "--timeout", "20s", "--nccl-library", swap};
    o = run_child(s);
    ASSERT_TRUE(o.is_ok());
    j = nlohmann::json::parse(o->out);
    summary = j.at("checks").at(0).at("summary");
    EXPECT_NE(summary.find("not loaded as root"), std::string::npos) << summary;
    EXPECT_NE(summary.find("owner uid 65534"), std::string::npos) << summary;
    EXPECT_FALSE(j.contains("ranks"));
  }
}

// The `nccl` rule judges the job's NCCL when one was found, not the system's.
TEST(job_nccl_matrix, the_rule_judges_the_jobs_nccl) {
  matrix_rules r = default_matrix_rules();
  r.nccl_min = dotted_version{{2, 20, 0}};
  node_facts f;
  f.nccl_version = 22803;
  f.job_nccl_source = "/v/nvidia/nccl/lib/libnccl.so.2 (nvidia-nccl wheel)";
  f.job_nccl_version = 21805;
  auto c = matrix::check_nccl(f, r);
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_NE(c.summary.find("the job's NCCL 2.18.5 < 2.20.0"), std::string::npos) << c.summary;
  EXPECT_NE(c.detail.find("system ncclGetVersion = 22803"), std::string::npos) << c.detail;
  f.job_nccl_version = 22809;
  EXPECT_EQ(matrix::check_nccl(f, r).result, verdict::pass);
  f.job_nccl_version = status::error("a symbolic link loop");
  c = matrix::check_nccl(f, r);
  EXPECT_EQ(c.result, verdict::warn);
  EXPECT_NE(c.summary.find("symbolic link loop"), std::string::npos) << c.summary;
}

}  // namespace
}  // namespace mrcheck
