// The NIC family table (include/mrcheck/nic_family.h): every row complete and its names unique, a family known
// from its row alone, and docs/transports.md's table ("NIC families") saying what the rows say.
#include <mrcheck/facts.h>
#include <mrcheck/nic_family.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace mrcheck {
namespace {

bool has(std::span<const std::string_view> v, std::string_view x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

TEST(NicFamily, EveryRowCompleteAndUnique) {
  std::set<std::string_view> names, providers, prefixes, drivers;
  ASSERT_FALSE(nic_families().empty());
  for (const nic_family& f : nic_families()) {
    SCOPED_TRACE(std::string(f.name));
    EXPECT_FALSE(f.name.empty());
    EXPECT_FALSE(f.provider.empty());
    EXPECT_FALSE(f.name_prefix.empty());
    EXPECT_FALSE(f.provider_source.empty());
    EXPECT_FALSE(f.modules.empty());
    EXPECT_TRUE(has(f.modules, f.verbs_module)) << "the verbs module is one of the modules read";
    EXPECT_TRUE(names.insert(f.name).second) << "family named twice";
    EXPECT_TRUE(providers.insert(f.provider).second) << "provider of two families";
    EXPECT_TRUE(prefixes.insert(f.name_prefix).second) << "name prefix of two families";
    for (std::string_view d : f.drivers) {
      EXPECT_FALSE(d.empty());
      EXPECT_TRUE(drivers.insert(d).second) << "driver " << d << " of two families";
    }
    EXPECT_EQ(find_nic_family(f.name), &f);
  }
  EXPECT_EQ(find_nic_family("no_such_family"), nullptr);
}

// Each row recognises its own devices: by each parent driver, and by the name prefix when the driver is unknown
// (hardware) or absent (software). Nothing else in the program is needed.
TEST(NicFamily, KnownFromItsRowAlone) {
  for (const nic_family& f : nic_families()) {
    SCOPED_TRACE(std::string(f.name));
    rdma_device_fact d;
    d.name = std::string(f.name_prefix) + "0";
    EXPECT_EQ(nic_family_of(d), &f);
    EXPECT_EQ(rdma_family(d), f.name);
    for (std::string_view drv : f.drivers) {
      rdma_device_fact renamed;
      renamed.name = "rdmap16s27";  // a name udev gave, telling nothing
      renamed.driver = std::string(drv);
      EXPECT_EQ(nic_family_of(renamed), &f) << drv;
    }
  }
  rdma_device_fact other;
  other.name = "hfi1_0";
  other.driver = "hfi1";
  EXPECT_EQ(nic_family_of(other), nullptr);
  EXPECT_EQ(rdma_family(other), "");
  // A hardware family's prefix does not win over a driver that names no family.
  rdma_device_fact foreign;
  foreign.name = "mlx5_0";
  foreign.driver = "hfi1";
  EXPECT_EQ(nic_family_of(foreign), nullptr);
}

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The `names` of a table cell: "`ice` (E810), `i40e` (X722)" -> {"ice", "i40e"}.
std::vector<std::string> ticked(std::string_view cell) {
  std::vector<std::string> out;
  while (true) {
    auto a = cell.find('`');
    if (a == std::string_view::npos) break;
    auto b = cell.find('`', a + 1);
    if (b == std::string_view::npos) break;
    out.emplace_back(cell.substr(a + 1, b - a - 1));
    cell.remove_prefix(b + 1);
  }
  return out;
}

std::vector<std::string> cells(std::string_view line) {
  std::vector<std::string> out;
  line.remove_prefix(1);  // the leading '|'
  while (!line.empty()) {
    auto bar = line.find('|');
    std::string_view c = line.substr(0, bar);
    while (!c.empty() && c.front() == ' ') c.remove_prefix(1);
    while (!c.empty() && c.back() == ' ') c.remove_suffix(1);
    out.emplace_back(c);
    if (bar == std::string_view::npos) break;
    line.remove_prefix(bar + 1);
  }
  return out;
}

// docs/transports.md's "NIC families" table lists the same families in the same order, with the row's drivers,
// verbs module, provider and a device name the row's prefix recognises.
TEST(NicFamily, DocsTableSaysWhatTheRowsSay) {
  std::filesystem::path doc = std::filesystem::path(MRCHECK_FIXTURES_DIR).parent_path().parent_path() / "docs" /
                              "transports.md";
  std::string text = read(doc);
  auto section = text.find("\n## NIC families\n");
  ASSERT_NE(section, std::string::npos) << doc;
  auto header = text.find("\n| family |", section);
  ASSERT_NE(header, std::string::npos);
  std::istringstream in(text.substr(header + 1));
  std::string line;
  std::getline(in, line);  // header
  std::getline(in, line);  // |---|
  std::vector<std::vector<std::string>> rows;
  while (std::getline(in, line) && line.starts_with("|")) rows.push_back(cells(line));
  auto fams = nic_families();
  ASSERT_EQ(rows.size(), fams.size()) << "one table row per family";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const nic_family& f = fams[i];
    const auto& r = rows[i];
    SCOPED_TRACE(std::string(f.name));
    ASSERT_EQ(r.size(), 5u);
    EXPECT_EQ(r[0], f.name);
    std::vector<std::string> drv = ticked(r[1]);
    // Software families have no parent driver; the doc names the drivers that matter (a row may take more).
    EXPECT_EQ(drv.empty(), f.drivers.empty());
    for (const auto& d : drv) EXPECT_TRUE(has(f.drivers, d)) << d;
    EXPECT_EQ(ticked(r[2]), std::vector<std::string>{std::string(f.verbs_module)});
    EXPECT_EQ(ticked(r[3]), std::vector<std::string>{std::string(f.provider)});
    std::vector<std::string> names = ticked(r[4]);
    ASSERT_FALSE(names.empty());
    EXPECT_TRUE(names.front().starts_with(f.name_prefix)) << names.front();
  }
}

}  // namespace
}  // namespace mrcheck
