// Releases whose registration defaults changed (include/mrcheck/default_changes.h): the rows an NCCL or driver
// move crosses, in both directions, the lines and JSON the stack history gives for them, and versions that are
// unknown or not versions at all (no row, no crash).
#include <mrcheck/default_changes.h>
#include <mrcheck/history.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace mrcheck {
namespace {

std::vector<std::string> settings(std::string_view key, std::string_view before, std::string_view after) {
  std::vector<std::string> out;
  for (const auto& d : defaults_crossed(key, before, after)) {
    out.push_back(std::string(d.row->setting) + (d.reverted ? " reverted" : ""));
  }
  return out;
}

TEST(DefaultChanges, ParsesVersions) {
  EXPECT_EQ(parse_release_version("2.27.7"), (release_version{2, 27, 7}));
  EXPECT_EQ(parse_release_version("2.27"), (release_version{2, 27, 0}));
  EXPECT_EQ(parse_release_version("570.86.15 (open)"), (release_version{570, 86, 15}));
  EXPECT_EQ(parse_release_version("2.28.9+cuda13.0"), (release_version{2, 28, 9}));
  EXPECT_FALSE(parse_release_version(""));
  EXPECT_FALSE(parse_release_version("2"));
  EXPECT_FALSE(parse_release_version("v2.27.3"));
  EXPECT_FALSE(parse_release_version("-2.27.3"));
  EXPECT_FALSE(parse_release_version("2.-1.3"));
  EXPECT_FALSE(parse_release_version("99999999999999999999999.1"));
}

// The example, word for word after the prefix.
TEST(DefaultChanges, GdrC2cIn227) {
  EXPECT_EQ(settings("nccl", "2.26.5", "2.27.7"),
            (std::vector<std::string>{"NCCL_NET_GDR_C2C now 1", "MNNVL failure now fatal"}));
  auto d = defaults_crossed("nccl", "2.26.5", "2.27.7");
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(default_change_words(d[0], "2.26.5", "2.27.7"),
            "NCCL 2.26.5 -> 2.27.7: NCCL_NET_GDR_C2C now 1: GPU buffers on Grace are registered through the NIC");
}

// A row's own release is crossed; the release before it is not.
TEST(DefaultChanges, Boundaries) {
  EXPECT_EQ(settings("nccl", "2.27.7", "2.28.3"), (std::vector<std::string>{"NCCL_PXN_C2C now 1"}));
  EXPECT_TRUE(settings("nccl", "2.27.3", "2.27.7").empty());
  EXPECT_TRUE(settings("nccl", "2.28.3", "2.28.9").empty());
  EXPECT_EQ(settings("nccl", "2.18.6", "2.19.1"), (std::vector<std::string>{"NCCL_CUMEM_ENABLE now auto"}));
  EXPECT_TRUE(settings("nccl", "2.19.1", "2.19.3").empty());
  EXPECT_TRUE(settings("nccl", "2.28.9", "2.28.9").empty());
}

TEST(DefaultChanges, SeveralRowsNameEach) {
  EXPECT_EQ(settings("nccl", "2.18.3", "2.28.9"),
            (std::vector<std::string>{"NCCL_CUMEM_ENABLE now auto", "NCCL_CUMEM_HOST_ENABLE now auto",
                                      "NCCL_NET_GDR_C2C now 1", "MNNVL failure now fatal", "NCCL_PXN_C2C now 1"}));
}

TEST(DefaultChanges, DowngradeSaysReverted) {
  EXPECT_EQ(settings("nccl", "2.28.3", "2.26.5"),
            (std::vector<std::string>{"NCCL_NET_GDR_C2C now 1 reverted", "MNNVL failure now fatal reverted",
                                      "NCCL_PXN_C2C now 1 reverted"}));
  auto d = defaults_crossed("nccl", "2.27.7", "2.26.5");
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(default_change_words(d[0], "2.27.7", "2.26.5"),
            "NCCL 2.27.7 -> 2.26.5: reverted, NCCL_NET_GDR_C2C 0 (before 2.27.3)");
}

TEST(DefaultChanges, DriverRow) {
  EXPECT_EQ(settings("nvidia_driver", "550.127.05 (proprietary)", "560.35.03 (open)"),
            (std::vector<std::string>{"installers now default to the open kernel modules"}));
  EXPECT_TRUE(settings("nvidia_driver", "570.86.15 (open)", "580.95.05 (open)").empty());
  // The driver's rows are not NCCL's, nor the reverse.
  EXPECT_TRUE(settings("nccl", "550.0.0", "560.0.0").empty());
  EXPECT_TRUE(settings("nvidia_driver", "2.26.5", "2.27.7").empty());
}

TEST(DefaultChanges, UnknownVersionsGiveNoRow) {
  EXPECT_TRUE(settings("nccl", "", "2.27.7").empty());  // NCCL newly found
  EXPECT_TRUE(settings("nccl", "2.26.5", "").empty());  // NCCL gone
  EXPECT_TRUE(settings("nccl", "unknown", "2.27.7").empty());
  EXPECT_TRUE(settings("nccl", "2.26.5", "2.27.x").empty());  // a patch that is not a number
  EXPECT_TRUE(settings("nccl", "\xff\xfe", "2.99.99").empty());
  EXPECT_TRUE(settings("kernel", "6.1.0", "6.12.0").empty());
}

TEST(DefaultChanges, RowsAreSortedAndSourced) {
  std::string_view key;
  release_version last{0, 0, 0};
  for (const auto& r : default_change_rows()) {
    EXPECT_FALSE(r.source.empty()) << r.setting;
    EXPECT_FALSE(r.effect.empty()) << r.setting;
    EXPECT_FALSE(r.before.empty()) << r.setting;
    if (r.key != key) {
      key = r.key;
      last = {0, 0, 0};
    }
    EXPECT_LE(last, r.since) << r.setting;
    last = r.since;
  }
}

// The history's lines and JSON: the change line first, then one line per crossed default.
TEST(DefaultChanges, HistoryLinesAndJson) {
  stack_change c;
  c.time = 1764400000;
  stack_change_item i{"nccl", "2.26.5", "2.27.7"};
  c.items.push_back(i);
  auto lines = change_lines(c, i);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], change_line(c, i));
  EXPECT_EQ(lines[1],
            "mrcheck: changed: NCCL 2.26.5 -> 2.27.7: NCCL_NET_GDR_C2C now 1: GPU buffers on Grace are registered "
            "through the NIC");
  EXPECT_EQ(lines[2].rfind("mrcheck: changed: NCCL 2.26.5 -> 2.27.7: MNNVL failure now fatal: ", 0), 0u);
  auto j = change_defaults_json(i);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["setting"], "NCCL_NET_GDR_C2C now 1");
  EXPECT_EQ(j[0]["since"], "2.27.3");
  EXPECT_EQ(j[0]["reverted"], false);
  EXPECT_NE(j[0]["source"].get<std::string>().find("v2.27.3-1"), std::string::npos);
  // A kernel change has its one line and no defaults.
  stack_change_item k{"kernel", "6.1.0-28-amd64", "6.1.0-30-amd64"};
  EXPECT_EQ(change_lines(c, k).size(), 1u);
  EXPECT_TRUE(change_defaults_json(k).empty());
}

}  // namespace
}  // namespace mrcheck
