// The cause rows behind diagnose() (src/explain/causes/cause_rows.h): every failure kind ends in a row that takes
// whatever the rows before it left, so diagnose() never runs off the end of its tables; and a row's columns narrow
// the match the way the header says.
#include "explain/causes/cause_rows.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace mrcheck {
namespace {

using namespace cause_rows;

bool catches_everything(const cause_row& r) {
  return r.err.a == k_any_errno && r.call_class == calls::any && r.names.empty() && r.mem == memory::any &&
         r.when == &yes;
}

TEST(diagnosis_rows, every_kind_has_a_last_row_that_takes_the_rest) {
  const failure::kind kinds[] = {failure::kind::call,         failure::kind::duplicate_gpu,
                                 failure::kind::no_device,    failure::kind::completion_error,
                                 failure::kind::system_error, failure::kind::fatal_warning};
  for (failure::kind k : kinds) {
    bool found = false;
    for (auto family : {nccl_rows, memory_rows, gpu_rows, stack_rows}) {
      for (const cause_row& r : family()) found = found || (r.kind == k && catches_everything(r));
    }
    EXPECT_TRUE(found) << "failure kind " << static_cast<int>(k);
  }
}

TEST(diagnosis_rows, columns_narrow_the_match) {
  failure f;
  f.call = "ibv_reg_dmabuf_mr";
  f.err = EOPNOTSUPP;
  const node_evidence e;
  const case_ctx c{f, e};
  EXPECT_TRUE((cause_row{.err = {EOPNOTSUPP, EPROTONOSUPPORT}, .call_class = calls::dmabuf}.match(c)));
  EXPECT_FALSE((cause_row{.err = EINVAL}.match(c)));
  EXPECT_FALSE((cause_row{.call_class = calls::queue}.match(c)));
  EXPECT_TRUE((cause_row{.names = "ibv_reg_mr|ibv_reg_dmabuf_mr"}.match(c)));
  EXPECT_FALSE((cause_row{.names = "ibv_reg_mr|ibv_reg_dmabuf"}.match(c)));
  EXPECT_TRUE((cause_row{.mem = memory::unknown}.match(c)));
  EXPECT_FALSE((cause_row{.mem = memory::gpu}.match(c)));
  EXPECT_FALSE((cause_row{.kind = failure::kind::fatal_warning}.match(c)));
  EXPECT_FALSE((cause_row{.when = no}.match(c)));
}

}  // namespace
}  // namespace mrcheck
