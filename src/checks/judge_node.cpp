// The one "judge this node" sequence (include/mrcheck/judge_node.h): report, fleet and prolog call it.
#include <mrcheck/judge_node.h>

#include <mrcheck/child.h>
#include <mrcheck/config.h>
#include <mrcheck/slurm_conf.h>

#include <future>
#include <system_error>

namespace mrcheck {

namespace {

// The job's NCCL, when it is not the system's own, into the facts the `nccl` rule reads.
job_nccl note_job_nccl(node_facts& facts) {
  job_nccl job = find_job_nccl(job_nccl_inputs_from_env(current_environment()));
  const nccl_candidate* c = job.job();
  std::string sys_path = facts.libnccl ? facts.libnccl->path : std::string();
  if (c && (c->real_path.empty() || c->real_path != sys_path)) {
    facts.job_nccl_source = c->path + " (" + c->origin + ")";
    if (!c->info) {
      facts.job_nccl_version = c->info.error();
    } else if (c->info->version_code == 0) {
      facts.job_nccl_version = status::error("no NCCL version string in the file");
    } else {
      facts.job_nccl_version = c->info->version_code;
    }
  }
  return job;
}

// The node's facts, the libraries loaded beside the sysfs and procfs reads on the host.
node_facts collect_node_facts(const sysroot& root, const collect_options& copts, bool load_libraries,
                              const std::function<void(std::string_view)>& mark) {
  if (!load_libraries) {
    node_facts facts = collect_facts(root, copts);  // copts.load_libraries is off
    mark("sysfs+procfs");
    return facts;
  }
  std::future<library_facts> libs;
  if (root.is_host()) {
    try {
      libs = std::async(std::launch::async, load_library_facts, copts.verbs_library);
    } catch (const std::system_error&) {
      // No thread to be had: load them on this one below.
    }
  }
  node_facts facts = collect_facts(root, copts);
  mark("sysfs+procfs");
  if (root.is_host()) {
    apply_library_facts(libs.valid() ? libs.get() : load_library_facts(copts.verbs_library), facts);
  }
  mark("libraries");
  return facts;
}

}  // namespace

node_judgement judge_node(const sysroot& root, const matrix_rules& rules, const judge_options& o) {
  auto mark = [&o](std::string_view phase) {
    if (o.phase_done) o.phase_done(phase);
  };
  collect_options copts;
  copts.slurm_conf = slurm_conf_path(root);
  copts.verbs_library = o.cfg ? o.cfg->verbs_library : config{}.verbs_library;
  copts.load_libraries = false;  // loaded by collect_node_facts (when asked), on a thread of their own
  node_judgement j;
  j.facts = collect_node_facts(root, copts, o.load_libraries, mark);
  if (o.job_nccl_from_env && root.is_host()) j.job = note_job_nccl(j.facts);
  j.extra = collect_matrix_facts(root, copts.slurm_conf, !j.facts.libibverbs.is_ok());
  mark("matrix facts");
  j.rep = run_checks(o.selection, node_check_inputs(j.facts, rules, o.cfg, &j.extra));
  mark("judge");
  j.fp = make_fingerprint(j.facts, j.extra, rules, read_boot_info(root, o.now), read_dkms_modules(root, j.facts));
  mark("fingerprint");
  return j;
}

}  // namespace mrcheck
