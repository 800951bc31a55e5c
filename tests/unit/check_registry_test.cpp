// The check registry: the ids it declares are the ones README documents, and every front end
// (mrcheck report, mrcheck-prolog, the plugin's node_task) picks its checks from it, so the same
// request gives the same checks and the same verdicts whichever program asks.
#include <mrcheck/check_registry.h>
#include <mrcheck/checks.h>
#include <mrcheck/config.h>
#include <mrcheck/matrix.h>
#include <mrcheck/step.h>

#include "check_rows.h"
#include "judge.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace mrcheck {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> ids_of(const report& r) {
  std::vector<std::string> out;
  for (const auto& c : r.checks) out.push_back(c.id);
  return out;
}

std::vector<std::string> strings(const std::vector<std::string_view>& v) { return {v.begin(), v.end()}; }

// The groups of a selection's ids, each run of one group once: the order in which a front end lists groups.
std::vector<check_group> groups_of(const std::vector<std::string_view>& ids) {
  std::vector<check_group> out;
  for (auto id : ids) {
    const check_def* d = find_check(id);
    EXPECT_NE(d, nullptr) << id;
    if (d != nullptr && (out.empty() || out.back() != d->group)) out.push_back(d->group);
  }
  return out;
}

// Every row of `g` that a selection runs (made by run_checks, a probe or the container helper), in the
// registry's order: what a selection naming `g` must list, whatever rows are added later.
std::vector<std::string_view> rows_of(check_group g, bool with_container = true) {
  std::vector<std::string_view> out;
  for (const check_def* row : test::all_check_rows()) {
    const check_def& d = *row;
    bool selectable = d.origin == check_origin::registry || d.origin == check_origin::probe ||
                      (with_container && d.origin == check_origin::container);
    if (d.group == g && selectable) out.push_back(d.id);
  }
  return out;
}

std::vector<std::string_view> concat(std::initializer_list<std::vector<std::string_view>> parts) {
  std::vector<std::string_view> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// README's "## Checks" table: id -> group.
std::map<std::string, std::string> readme_checks() {
  std::ifstream in(fs::path(MRCHECK_FIXTURES_DIR).parent_path().parent_path() / "README.md");
  std::stringstream s;
  s << in.rdbuf();
  std::string all = s.str();
  auto begin = all.find("\n## Checks\n");
  EXPECT_NE(begin, std::string::npos) << "README.md has no '## Checks' section";
  if (begin == std::string::npos) return {};
  auto end = all.find("\n## ", begin + 1);
  std::string section = all.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  static const std::regex row(R"(\n\| `([a-z0-9_]+)` \| ([a-z]+) \|)");
  std::map<std::string, std::string> out;
  for (auto it = std::sregex_iterator(section.begin(), section.end(), row); it != std::sregex_iterator(); ++it) {
    out[(*it)[1]] = (*it)[2];
  }
  return out;
}

node_facts fixture(const std::string& name) {
  auto root = sysroot::open(fs::path(MRCHECK_FIXTURES_DIR) / name);
  EXPECT_TRUE(root.is_ok());
  return collect_facts(*root, {});
}

TEST(CheckRegistry, IdsAreUniqueAndEqualTheDocumentedOnes) {
  std::map<std::string, std::string> declared;
  for (const check_def* row : test::all_check_rows()) {
    const check_def& d = *row;
    EXPECT_TRUE(declared.emplace(std::string(d.id), std::string(to_string(d.group))).second) << d.id << " twice";
    EXPECT_EQ(find_check(d.id), &d);
    EXPECT_FALSE(d.what.empty()) << d.id;
    bool probe = d.group == check_group::mr || d.group == check_group::nccl || d.group == check_group::rdma;
    bool child = d.origin == check_origin::probe || d.origin == check_origin::container;
    EXPECT_EQ(child, probe) << d.id << ": the probe groups' checks, and only they, run in a child";
    EXPECT_EQ(d.run != nullptr, d.origin == check_origin::registry) << d.id << ": run_checks calls only its own";
  }
  EXPECT_EQ(declared, readme_checks()) << "README.md's check table and src/checks/registry.cpp disagree";
  EXPECT_EQ(find_check("no_such_check"), nullptr);
}

// Every check id a verdict is made with in the sources (a literal given to an id, to the check makers, or to a
// check_result's first field) is a registry row, and every row is made somewhere. A probe that gives no report
// of its own is judged under its group's first check (src/step/plugin_engine.cpp, unit test
// AProbeNotRunIsJudgedUnderItsGroupsFirstCheck).
TEST(CheckRegistry, EveryVerdictIdInTheSourcesIsARow) {
  fs::path root = fs::path(MRCHECK_FIXTURES_DIR).parent_path().parent_path();
  static const std::regex forms[] = {
      std::regex(R"re(id\s*=\s*"([a-z0-9_]+)")re"),
      std::regex(R"re(\b(?:make|missing|skipped)\(\s*"([a-z0-9_]+)")re"),
      std::regex(R"re(\{\s*"([a-z0-9_]+)",\s*verdict::)re"),
  };
  std::map<std::string, std::string> made;  // id -> first file that makes it
  for (const char* dir : {"src", "spank", "prolog", "cli", "include"}) {
    ASSERT_TRUE(fs::is_directory(root / dir)) << root / dir;
    for (const auto& e : fs::recursive_directory_iterator(root / dir)) {
      auto ext = e.path().extension();
      if (!e.is_regular_file() || (ext != ".cpp" && ext != ".h" && ext != ".c")) continue;
      std::ifstream in(e.path());
      std::stringstream text;
      text << in.rdbuf();
      std::string all = text.str();
      for (const auto& form : forms) {
        for (auto it = std::sregex_iterator(all.begin(), all.end(), form); it != std::sregex_iterator(); ++it) {
          made.emplace((*it)[1], fs::relative(e.path(), root).string());
        }
      }
    }
  }
  std::set<std::string> rows;
  for (const check_def* row : test::all_check_rows()) rows.emplace(row->id);
  for (const auto& [id, file] : made) {
    EXPECT_TRUE(rows.count(id)) << file << " makes a verdict with id '" << id
                                << "', which is no row of src/checks/registry.cpp";
  }
  for (const auto& id : rows) EXPECT_TRUE(made.count(id)) << id << ": a row no source makes";
  // The scan sees the checks made outside any selection.
  EXPECT_EQ(made.count("memlock_exec"), 1u);
  EXPECT_EQ(made.count("revalidate"), 1u);
}

TEST(CheckRegistry, ProbeAndContainerIdsComeFromTheRegistry) {
  auto set = [](std::span<const std::string_view> v) { return std::set<std::string>(v.begin(), v.end()); };
  EXPECT_EQ(set(probe_check_ids("mr")), (std::set<std::string>{"mr_host", "dmabuf", "mr_gpu", "mnnvl_handle"}));
  EXPECT_EQ(set(probe_check_ids("nccl")), (std::set<std::string>{"nccl_pair"}));
  EXPECT_EQ(set(probe_check_ids("rdma")), (std::set<std::string>{"data_plane"}));
  EXPECT_TRUE(probe_check_ids("memlock").empty());
  for (const char* id :
       {"mr_host", "dmabuf", "mr_gpu", "nccl_pair", "data_plane", "container", "container_mr", "container_nccl"}) {
    EXPECT_TRUE(from_job_probe(id)) << id;
  }
  for (const char* id : {"memlock", "memlock_exec", "nccl", "mr", "revalidate", "hca_fw", ""}) {
    EXPECT_FALSE(from_job_probe(id)) << id;
  }
  // Made outside any selection: never selected, never run by run_checks.
  check_groups all;
  all.memlock = all.mr = all.nccl = true;
  for (const auto& s : {report_selection(), prolog_selection(), plugin_selection(all, true)}) {
    auto ids = strings(selected_ids(s));
    EXPECT_EQ(std::count(ids.begin(), ids.end(), "memlock_exec"), 0);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), "revalidate"), 0);
  }
}

TEST(CheckRegistry, TheMatrixListIsWrittenOnce) {
  auto ids = strings(selected_ids(matrix_only()));
  EXPECT_EQ(ids, strings(rows_of(check_group::matrix)));
  auto rules = default_matrix_rules();
  node_facts f = fixture("gpu_h200");
  EXPECT_EQ(ids_of(judge_matrix(f, rules)), ids);
  EXPECT_EQ(ids_of(judge_matrix(f, rules, matrix_facts{})), ids);
}

// Groups in the front end's order, each group's rows in the registry's order. Derived from the rows, so a new
// check needs no change here.
TEST(CheckRegistry, FrontEndsSelectTheirGroupsInTheirOrder) {
  using g = check_group;
  EXPECT_EQ(groups_of(selected_ids(report_selection())), (std::vector<g>{g::memlock, g::memory, g::matrix}));
  EXPECT_EQ(selected_ids(report_selection()), concat({rows_of(g::memlock), rows_of(g::memory), rows_of(g::matrix)}));
  EXPECT_EQ(groups_of(selected_ids(prolog_selection())), (std::vector<g>{g::matrix, g::memory}));
  EXPECT_EQ(selected_ids(prolog_selection()), concat({rows_of(g::matrix), rows_of(g::memory)}));
  check_groups all;
  all.memlock = all.mr = all.nccl = all.rdma = true;
  EXPECT_EQ(groups_of(selected_ids(plugin_selection(all, true))),
            (std::vector<g>{g::memlock, g::mr, g::nccl, g::rdma}));
  EXPECT_EQ(selected_ids(plugin_selection(all, true)),
            concat({rows_of(g::memlock), rows_of(g::mr), rows_of(g::nccl), rows_of(g::rdma)}));
  check_groups rdma_only;
  rdma_only.rdma = true;
  EXPECT_EQ(selected_ids(plugin_selection(rdma_only, true)), (std::vector<std::string_view>{"data_plane"}));
  EXPECT_EQ(selected_ids(plugin_selection(all, false)), rows_of(g::memlock));
  check_groups mr_only;
  mr_only.mr = true;
  EXPECT_EQ(selected_ids(plugin_selection(mr_only, true)), rows_of(g::mr));
  // The container's rows sit after the probe's in their group (a task in a container reports both kinds).
  auto mr = rows_of(g::mr);
  auto first_container = std::find_if(mr.begin(), mr.end(), [](auto id) { return id.starts_with("container"); });
  EXPECT_TRUE(std::all_of(first_container, mr.end(), [](auto id) { return id.starts_with("container"); }));
  // A group named twice runs once.
  EXPECT_EQ(selected_ids(check_selection{{g::memory, g::memory}}), rows_of(g::memory));
}

// mrcheck report and mrcheck-prolog run the checks they share with the same inputs to the same verdicts, and
// run_basic_checks (the report's node part) is the registry's too.
TEST(CheckRegistry, ReportAndPrologAgreeOnEveryCheckTheyShare) {
  config cfg;
  auto rules = default_matrix_rules();
  for (const char* name : {"gpu_h200", "hca_inbox_open", "cpu_debian12", "garbage"}) {
    node_facts f = fixture(name);
    matrix_facts extra;
    check_inputs in;
    in.facts = &f;
    in.cfg = &cfg;
    in.rules = &rules;
    in.extra = &extra;
    report rep = run_checks(report_selection(), in);
    report pro = run_checks(prolog_selection(), in);
    EXPECT_EQ(ids_of(rep), strings(selected_ids(report_selection()))) << name;
    EXPECT_EQ(ids_of(pro), strings(selected_ids(prolog_selection()))) << name;
    for (const auto& c : pro.checks) {
      const check_result* r = rep.find(c.id);
      ASSERT_NE(r, nullptr) << name << ": " << c.id;
      EXPECT_EQ(r->result, c.result) << name << ": " << c.id;
      EXPECT_EQ(r->summary, c.summary) << name << ": " << c.id;
    }
    report basic = run_basic_checks(f, cfg, rules);
    EXPECT_EQ(ids_of(basic), strings(concat({rows_of(check_group::memlock), rows_of(check_group::memory)}))) << name;
    EXPECT_EQ(basic.checks[0].summary, check_memlock(f, cfg).summary) << name;
  }
}

TEST(CheckRegistry, MissingInputsAreTheCheckersErrorNotAVerdict) {
  check_inputs none;
  report r = run_checks(report_selection(), none);
  ASSERT_EQ(r.checks.size(), selected_ids(report_selection()).size());
  for (const auto& c : r.checks) EXPECT_EQ(c.result, verdict::error) << c.id << ": " << c.summary;
  // The probe groups without a probe runner are not run at all.
  check_groups g;
  g.mr = true;
  EXPECT_TRUE(run_checks(plugin_selection(g, true), none).checks.empty());
}

// The plugin's node_task picks through the registry too: memlock from its prediction, each probe group once,
// only on local task 0, in the registry's order.
TEST(CheckRegistry, PluginNodeTaskRunsWhatItsSelectionNames) {
  config c;
  node_state st;
  st.active = true;
  st.checks.memlock = true;
  st.checks.mr = true;
  st.checks.nccl = true;
  st.checks.rdma = true;
  st.required = 8 << 20;
  st.prediction.start = {k_unlimited, k_unlimited};
  std::vector<std::string> asked;
  probe_runner probe = [&](const std::string& group, const task_facts&, const memlock_limit&) {
    asked.push_back(group);
    std::vector<check_result> out;
    for (const check_def* row : test::all_check_rows()) {
      const check_def& d = *row;
      if (to_string(d.group) == group) out.push_back({std::string(d.id), verdict::pass, "ok", "", ""});
    }
    return out;
  };
  task_facts t;
  auto v = node_task(c, t, st, probe);
  EXPECT_EQ(ids_of(v.rep), strings(selected_ids(plugin_selection(st.checks, true))));
  EXPECT_EQ(asked, (std::vector<std::string>{"mr", "nccl", "rdma"}));
  EXPECT_EQ(v.rep.checks[0].result, verdict::pass) << v.rep.checks[0].summary;
  asked.clear();
  t.local_task_id = 1;
  auto other = node_task(c, t, st, probe);
  EXPECT_EQ(ids_of(other.rep), strings(selected_ids(plugin_selection(st.checks, false))));
  EXPECT_TRUE(asked.empty());
}

}  // namespace
}  // namespace mrcheck
