// Finding F3 of tests/fuzz/README.md: a rank child's "result {json}" line is untrusted (the child runs the job's
// environment), and from_json(nccl_rank_report) read its integers with get<int>(): 1e300 was a float-cast
// overflow (UB), 2^32 + 1 silently became rank 1, -1 a count of 2^64 - 1. Such lines must now throw a json
// exception, which the orchestrator (pair.cpp) turns into "no report".
#include <mrcheck/nccl_probe.h>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

namespace mrcheck {
namespace {

nccl_rank_report parse(const char* text) { return nlohmann::json::parse(text).get<nccl_rank_report>(); }

TEST(FuzzFixRankReport, FloatWhereAnIntegerBelongsIsRefused) {
  // tests/fuzz/crashes/nccl_probe_log-1, now in the corpus
  EXPECT_THROW(parse(R"({"rank":1e300})"), nlohmann::json::exception);
  EXPECT_THROW(parse(R"({"rank":1.5})"), nlohmann::json::exception);
  EXPECT_THROW(parse(R"({"rank":0,"nccl_version":-1e300})"), nlohmann::json::exception);
  EXPECT_THROW(parse(R"({"rank":0,"count":1e30})"), nlohmann::json::exception);
  EXPECT_THROW(parse(R"({"rank":0,"first_bad_index":9.3e18})"), nlohmann::json::exception);
}

TEST(FuzzFixRankReport, IntegerOutsideTheFieldsRangeIsRefused) {
  EXPECT_THROW(parse(R"({"rank":4294967297})"), nlohmann::json::exception);
  EXPECT_THROW(parse(R"({"rank":-2147483649})"), nlohmann::json::exception);
  EXPECT_THROW(parse(R"({"rank":0,"nccl_result":18446744073709551615})"), nlohmann::json::exception);
  EXPECT_THROW(parse(R"({"rank":0,"count":-1})"), nlohmann::json::exception);
  EXPECT_THROW(parse(R"({"rank":0,"first_bad_index":18446744073709551615})"), nlohmann::json::exception);
  EXPECT_THROW(parse(R"({"stage":"init"})"), nlohmann::json::exception);  // rank is required
  EXPECT_THROW(parse(R"({"rank":"0"})"), nlohmann::json::exception);
}

TEST(FuzzFixRankReport, ExtremesThatFitAreKeptExactly) {
  nccl_rank_report r = parse(R"({"rank":2147483647,"nccl_result":-2147483648,"count":18446744073709551615,
                                 "mismatches":0,"first_bad_index":-9223372036854775808,"nccl_version":22809,
                                 "first_bad_value":1e300,"expected":3})");
  EXPECT_EQ(r.rank, 2147483647);
  EXPECT_EQ(r.nccl_result, -2147483648LL);
  EXPECT_EQ(r.count, 18446744073709551615ull);
  EXPECT_EQ(r.first_bad_index, INT64_MIN);
  EXPECT_EQ(r.nccl_version, 22809);
  EXPECT_EQ(r.first_bad_value, 1e300);  // doubles stay doubles
  EXPECT_EQ(r.expected, 3.0);           // an integer where a double belongs is fine
  nccl_rank_report back = nlohmann::json(r).get<nccl_rank_report>();
  EXPECT_EQ(back.rank, r.rank);
  EXPECT_EQ(back.count, r.count);
  EXPECT_EQ(back.first_bad_index, r.first_bad_index);
}

TEST(FuzzFixRankReport, MissingOptionalIntegersKeepTheirDefaults) {
  nccl_rank_report r = parse(R"({"rank":3})");
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.nccl_result, 0);
  EXPECT_EQ(r.count, 0u);
  EXPECT_EQ(r.first_bad_index, -1);
}

}  // namespace
}  // namespace mrcheck
