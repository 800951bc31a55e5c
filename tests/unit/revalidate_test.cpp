// Re-validation after a change (prolog/revalidate.h): the NCCL pair runs where NET carries the traffic between two
// GPUs of the node when it has two (gpu-pair), on its one GPU twice otherwise (local-pair).
#include "prolog/revalidate.h"

#include <gtest/gtest.h>

namespace mrcheck::prolog {
namespace {

node_facts with_gpus(std::size_t n) {
  node_facts f;
  std::vector<gpu_fact> gpus(n);
  for (std::size_t i = 0; i < n; ++i) gpus[i].pci_bdf = "0000:" + std::to_string(0x1b + i) + ":00.0";
  f.gpus = std::move(gpus);
  return f;
}

TEST(Revalidate, NcclPairModeFollowsTheNodesGpus) {
  EXPECT_EQ(revalidation_nccl_mode(with_gpus(1)), nccl_mode::local_pair);
  EXPECT_EQ(revalidation_nccl_mode(with_gpus(2)), nccl_mode::gpu_pair);
  EXPECT_EQ(revalidation_nccl_mode(with_gpus(8)), nccl_mode::gpu_pair);
  // No GPU found (or not read): local-pair, whose probe says why it skips; never node-pair from the prolog.
  EXPECT_EQ(revalidation_nccl_mode(with_gpus(0)), nccl_mode::local_pair);
  EXPECT_EQ(revalidation_nccl_mode(node_facts{}), nccl_mode::local_pair);
}

TEST(Revalidate, DueOnlyForAChangeNotYetPassed) {
  stack_history h;
  EXPECT_FALSE(revalidation_due("on_change", h));
  EXPECT_TRUE(revalidation_due("always", h));
  h.changes.push_back({});
  EXPECT_TRUE(revalidation_due("on_change", h));
  h.revalidated = "pass";
  EXPECT_FALSE(revalidation_due("on_change", h));
  h.revalidated = "fail";
  EXPECT_TRUE(revalidation_due("on_change", h));
  EXPECT_FALSE(revalidation_due("never", h));
}

}  // namespace
}  // namespace mrcheck::prolog
