// mrcheck-prolog loads the libraries on a second thread with load_library_facts(): the facts must be the
// ones collect_facts() gathers on its own (same paths, versions, symbols, the same errors for a library
// that is absent), whichever thread runs it.
#include <mrcheck/facts.h>

#include <mrcheck/facts.h>
#include <mrcheck/sysroot.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <future>
#include <string>

namespace mrcheck {
namespace {

std::string describe(const result<library_fact>& l) {
  if (!l) return "error: " + l.error().message();
  std::string s = l->requested + " " + l->path + " " + l->version;
  for (const auto& [k, v] : l->symbols) s += " " + k + "=" + (v ? "1" : "0");
  return s;
}

std::string describe(const result<int>& v) { return v ? std::to_string(*v) : "error: " + v.error().message(); }

TEST(PrologLibraryFacts, SameAsCollectFactsOnThisHost) {
  collect_options opts;
  opts.load_libraries = true;
  node_facts whole = collect_facts(sysroot(), opts);

  // On another thread, as the prolog does.
  auto fut = std::async(std::launch::async, load_library_facts, opts.verbs_library);
  node_facts split;
  apply_library_facts(fut.get(), split);

  EXPECT_EQ(describe(split.libibverbs), describe(whole.libibverbs));
  EXPECT_EQ(describe(split.libcuda), describe(whole.libcuda));
  EXPECT_EQ(describe(split.libnccl), describe(whole.libnccl));
  EXPECT_EQ(describe(split.cuda_driver_version), describe(whole.cuda_driver_version));
  EXPECT_EQ(describe(split.nccl_version), describe(whole.nccl_version));
  // The JSON a dump records is the same too.
  EXPECT_EQ(libraries_to_json(split).dump(), libraries_to_json([&] {
                                               node_facts w;
                                               w.libibverbs = whole.libibverbs;
                                               w.libcuda = whole.libcuda;
                                               w.libnccl = whole.libnccl;
                                               w.cuda_driver_version = whole.cuda_driver_version;
                                               w.nccl_version = whole.nccl_version;
                                               return w;
                                             }())
                                                 .dump());
}

TEST(PrologLibraryFacts, AMissingVerbsLibraryIsAnErrorNotACrash) {
  auto l = load_library_facts("libmrcheck-no-such-verbs.so.1");
  ASSERT_FALSE(l.libibverbs.is_ok());
  EXPECT_NE(l.libibverbs.error().message().find("libmrcheck-no-such-verbs.so.1"), std::string::npos);
  // libcuda/libnccl are looked up regardless of the verbs library.
  EXPECT_NE(describe(l.cuda_driver_version), "error: not read");
  EXPECT_NE(describe(l.nccl_version), "error: not read");
}

}  // namespace
}  // namespace mrcheck
