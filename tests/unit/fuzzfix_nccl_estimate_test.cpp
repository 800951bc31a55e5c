// Finding F2 of tests/fuzz/README.md: NCCL_P2P_NET_CHUNKSIZE is the user's number, and the estimate multiplied it
// by NCCL_STEPS before comparing it with the SIMPLE buffer, which overflows for |chunk| > 2^60 (UB, and for big
// positive values a wrapped product that let a 2^62 chunk through into p2p_bytes).
#include <mrcheck/mr_probe.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

namespace mrcheck {
namespace {

nccl_estimate estimate_with(std::vector<std::string> kv) {
  return estimate_nccl_registration(load_nccl_env(kv, "", "/nonexistent/nccl.conf"), 1);
}

constexpr std::int64_t k_simple = 4194304;

TEST(FuzzFixNcclEstimate, HugeChunkIsCappedAtTheSimpleBufferOverSteps) {
  for (std::int64_t chunk :
       {std::numeric_limits<std::int64_t>::max(), std::int64_t{1} << 62, (std::int64_t{1} << 61) + 1}) {
    nccl_estimate e = estimate_with({"NCCL_P2P_NET_CHUNKSIZE=" + std::to_string(chunk)});
    EXPECT_EQ(e.p2p_chunk, k_simple / 8) << chunk;
    EXPECT_EQ(e.p2p_bytes, 2ull * 4 * 16 * (k_simple / 8)) << chunk;
  }
}

// Seen while fixing F2: the sums were unsaturated, so NCCL_BUFFSIZE=2^63-1 wrapped host_bytes past 2^64.
TEST(FuzzFixNcclEstimate, HugeBuffersAreEstimatedAtOneTebibyteWithoutWrapping) {
  const std::string max = std::to_string(std::numeric_limits<std::int64_t>::max());
  nccl_estimate e = estimate_with({"NCCL_BUFFSIZE=" + max, "NCCL_LL_BUFFSIZE=" + max, "NCCL_LL128_BUFFSIZE=" + max});
  const std::uint64_t tib = std::uint64_t{1} << 40;
  EXPECT_EQ(e.buff_simple, tib);
  EXPECT_EQ(e.buff_ll, tib);
  EXPECT_EQ(e.per_connection, 3 * tib);
  EXPECT_EQ(e.host_bytes, static_cast<std::uint64_t>(e.connections) * 3 * tib);
  EXPECT_GE(e.host_bytes, e.per_connection);
  EXPECT_GE(e.host_bytes, e.dmabuf_host_bytes);
  bool noted = false;
  for (const auto& n : e.notes)
    noted = noted || n.find("NCCL_BUFFSIZE=" + max + " is more than any buffer") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(FuzzFixNcclEstimate, MostNegativeChunkRegistersNothingAndDoesNotOverflow) {
  // The reproducer of F2 (tests/fuzz/crashes/nccl_env-1, now in the corpus); UBSan in the ASan build catches the
  // multiplication itself.
  nccl_estimate e = estimate_with({"NCCL_P2P_NET_CHUNKSIZE=-9223372036854775808"});
  EXPECT_EQ(e.p2p_chunk, std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(e.p2p_bytes, 0u);
}

TEST(FuzzFixNcclEstimate, ChunkAtTheLimitIsKeptAndOneMoreIsCapped) {
  nccl_estimate at = estimate_with({"NCCL_P2P_NET_CHUNKSIZE=524288"});
  EXPECT_EQ(at.p2p_chunk, 524288);
  nccl_estimate above = estimate_with({"NCCL_P2P_NET_CHUNKSIZE=524289"});
  EXPECT_EQ(above.p2p_chunk, 524288);
  nccl_estimate small_buffer = estimate_with({"NCCL_BUFFSIZE=1000", "NCCL_P2P_NET_CHUNKSIZE=126"});
  EXPECT_EQ(small_buffer.p2p_chunk, 125);  // 126 * 8 > 1000: NCCL takes 1000 / 8
}

}  // namespace
}  // namespace mrcheck
