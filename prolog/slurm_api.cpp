// libslurm behind slurm_api.h. What changed between the releases mrcheck builds for (docs/slurm-releases.md
// has each change with its upstream commit):
//   23.11  hostlist_t became the struct itself, so the API takes hostlist_t * (we use `auto *`)
//   24.11  slurm_get_errno() is gone; libslurm reports through errno, as it always did underneath
//   25.11  job_desc_msg_t.job_id and slurm_job_info_t.job_id gave way to step_id (a slurm_step_id_t)
//   26.05  slurm_load_job() takes a slurm_step_id_t (the uint32 wrapper is C11 _Generic: not for C++)
#include "slurm_api.h"

#ifdef MRCHECK_HAVE_SLURM

#include <cerrno>
#include <cstdlib>

extern "C" {
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
// Exported by libslurm (src/common/read_config.c) in every supported release but not declared in slurm.h:
// the NodeAddr slurm.conf gives a NodeName, which is how Slurm itself reaches a node whose name does not
// resolve. Returns xmalloc'd text. (Not slurm_conf_get_nodeaddr: that one is keyed by NodeHostname.)
char* slurm_conf_get_address(const char* node_name);
}

#ifndef SLURM_VERSION_NUM
#error "slurm/slurm_version.h does not define SLURM_VERSION_NUM"
#endif

namespace mrcheck::prolog::slurm_api {

namespace {

int last_error() {
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(24, 11, 0)
  return errno;
#else
  return slurm_get_errno();
#endif
}

// A failed call's code; a failure that left no code is still a failure.
int failed() {
  int e = last_error();
  return e != 0 ? e : SLURM_ERROR;
}

#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
slurm_step_id_t whole_job(std::uint32_t job) {
  slurm_step_id_t id;
  id.sluid = 0;
  id.job_id = job;
  id.step_het_comp = NO_VAL;
  id.step_id = NO_VAL;
  return id;
}
#endif

int load_job(job_info_msg_t** msg, std::uint32_t job) {
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(26, 5, 0)
  return slurm_load_job(msg, whole_job(job), SHOW_ALL);
#else
  return slurm_load_job(msg, job, SHOW_ALL);
#endif
}

void set_job_id(job_desc_msg_t& d, std::uint32_t job) {
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
  d.step_id = whole_job(job);
#else
  d.job_id = job;
#endif
}

}  // namespace

void init() { slurm_init(nullptr); }

std::string error_text(int code) {
  const char* t = slurm_strerror(code);
  return t ? t : "unknown error";
}

// slurm_errno.h: 1000-1999 are communication errors (SLURM_COMMUNICATIONS_*, SLURMCTLD_COMMUNICATIONS_*),
// 5000-5099 socket errors; errno values below 1000. Everything from 2000 (ESLURM_*) is an answer from
// slurmctld. The same ranges in every supported release.
bool transient(int code) {
  if (code >= 1000 && code < 2000) return true;
  if (code >= 5000 && code < 5100) return true;
  return code == ETIMEDOUT || code == ECONNREFUSED || code == ECONNRESET || code == EAGAIN || code == EHOSTUNREACH ||
         code == ENETUNREACH || code == EINTR;
}

int invalid_node_name() { return ESLURM_INVALID_NODE_NAME; }

int load_node(const std::string& name, node_state& out) {
  node_info_msg_t* msg = nullptr;
  std::string n = name;  // the API takes char *
  if (slurm_load_node_single(&msg, n.data(), SHOW_ALL) != SLURM_SUCCESS) return failed();
  int rc = SLURM_SUCCESS;
  if (!msg || msg->record_count == 0 || !msg->node_array[0].name) {
    rc = ESLURM_INVALID_NODE_NAME;
  } else {
    const node_info_t& ni = msg->node_array[0];
    out.drain = (ni.node_state & NODE_STATE_DRAIN) != 0;
    out.down = (ni.node_state & NODE_STATE_BASE) == NODE_STATE_DOWN;
    out.reason = ni.reason ? ni.reason : "";
  }
  slurm_free_node_info_msg(msg);
  return rc;
}

int update_node(const std::string& name, node_change change, const std::string& reason) {
  update_node_msg_t m;
  slurm_init_update_node_msg(&m);
  std::string n = name;
  std::string why = reason;
  m.node_names = n.data();
  m.node_state = change == node_change::drain ? NODE_STATE_DRAIN : NODE_RESUME;
  if (!why.empty()) m.reason = why.data();
  return slurm_update_node(&m) == SLURM_SUCCESS ? SLURM_SUCCESS : failed();
}

int load_admin_comment(std::uint32_t job, std::string& out) {
  job_info_msg_t* msg = nullptr;
  if (load_job(&msg, job) != SLURM_SUCCESS) return failed();
  out.clear();
  if (msg && msg->record_count > 0 && msg->job_array[0].admin_comment) out = msg->job_array[0].admin_comment;
  slurm_free_job_info_msg(msg);
  return SLURM_SUCCESS;
}

int set_admin_comment(std::uint32_t job, const std::string& text) {
  job_desc_msg_t d;
  slurm_init_job_desc_msg(&d);
  set_job_id(d, job);
  std::string t = text;
  d.admin_comment = t.data();
  return slurm_update_job(&d) == SLURM_SUCCESS ? SLURM_SUCCESS : failed();
}

int load_step_nodelist(std::uint32_t job, std::uint32_t step, std::string& out) {
  slurm_step_id_t id{};  // 25.11 added sluid: zero, as whole_job() sets it
  id.job_id = job;
  id.step_het_comp = NO_VAL;
  id.step_id = step;
  slurm_step_layout_t* layout = slurm_job_step_layout_get(&id);
  if (!layout) return failed();
  out = layout->node_list ? layout->node_list : "";
  slurm_job_step_layout_free(layout);
  return SLURM_SUCCESS;
}

std::vector<std::string> expand_hostlist(const std::string& list, std::size_t max) {
  std::vector<std::string> out;
  if (list.empty()) return out;
  // hostlist_t is a pointer type up to 23.02 and the struct from 23.11: `auto *` is right for both.
  auto* hl = slurm_hostlist_create(list.c_str());
  if (!hl) return out;
  while (out.size() < max) {
    char* h = slurm_hostlist_shift(hl);
    if (!h) break;
    out.emplace_back(h);
    std::free(h);
  }
  slurm_hostlist_destroy(hl);
  return out;
}

std::string node_address(const std::string& name) {
  char* addr = slurm_conf_get_address(name.c_str());
  if (!addr) return name;
  std::string s(addr);
  // xmalloc'd by libslurm; the callers end in moments, so it is not freed through slurm_xfree.
  return s.empty() ? name : s;
}

}  // namespace mrcheck::prolog::slurm_api

#endif  // MRCHECK_HAVE_SLURM
