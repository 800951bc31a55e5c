#!/usr/bin/env python3
"""Every --json output of mrcheck and mrcheck-prolog validated against its schema in docs/schema/ (schema_version 1).

A schema violation fails this test, never a run. The outputs come from the built programs on fixture trees, so no
hardware or Slurm is needed; about 2 s. The schemas themselves are checked to reject a wrong document (a missing
schema_version, an action outside the closed list), so a schema that accepts anything fails here too.
Needs python3-jsonschema (scripts/install-deps.sh).
"""
import copy
import json
import os
import subprocess
import sys
import tempfile

try:
    import jsonschema
except ImportError:
    print("SKIP: python3-jsonschema not installed")
    sys.exit(77)

src = os.environ.get("MRCHECK_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
build = os.environ.get("MRCHECK_BUILD_DIR") or os.path.join(src, "build")
mrcheck = os.path.join(build, "cli", "mrcheck")
prolog = os.path.join(build, "prolog", "mrcheck-prolog")
fixtures = os.path.join(src, "tests", "fixtures")
schema_dir = os.path.join(src, "docs", "schema")
if not os.access(mrcheck, os.X_OK):
    print(f"SKIP: {mrcheck} not built")
    sys.exit(77)

schemas = {}
for name in os.listdir(schema_dir):
    if name.endswith(".schema.json"):
        with open(os.path.join(schema_dir, name)) as f:
            s = json.load(f)
        jsonschema.Draft202012Validator.check_schema(s)
        schemas[name[: -len(".schema.json")]] = s
common = schemas.pop("common")
prefix = common["$id"] + "#/$defs/"


def inline(node):
    """The schema with common.schema.json's definitions copied in: no reference leaves the document, so any
    jsonschema (Debian 12's 4.10 or a newer one) resolves it offline."""
    if isinstance(node, dict):
        return {k: ("#/$defs/" + v[len(prefix):] if k == "$ref" and isinstance(v, str) and v.startswith(prefix)
                    else inline(v)) for k, v in node.items()}
    if isinstance(node, list):
        return [inline(v) for v in node]
    return node


for kind in schemas:
    s = inline(schemas[kind])
    s["$defs"] = {**common["$defs"], **s.get("$defs", {})}
    schemas[kind] = s


def validator(kind):
    return jsonschema.Draft202012Validator(schemas[kind])


failures = []


def run(cmd, ok_codes=(0, 1)):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if p.returncode not in ok_codes:
        failures.append(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr[:300]}")
        return None
    try:
        return json.loads(p.stdout)
    except ValueError as e:
        failures.append(f"{' '.join(cmd)}: not JSON ({e}): {p.stdout[:200]}")
        return None


def check(kind, doc, what):
    if doc is None:
        return
    errors = sorted(validator(kind).iter_errors(doc), key=lambda e: list(e.path))
    if errors:
        failures.append(f"{what}: {len(errors)} violation(s) of {kind}.schema.json, first: "
                        f"{list(errors[0].path)}: {errors[0].message[:300]}")
    else:
        print(f"ok: {what} matches {kind}.schema.json")


state = tempfile.mkdtemp(prefix="mrcheck-schema-")
for fx in ("gpu_h200", "matrix_hca_fw_old", "cpu_debian12"):
    check("report", run([mrcheck, "report", "--json", "--root", os.path.join(fixtures, fx)]), f"report --root {fx}")
    check("prolog", run([prolog, "--json", "--dry-run", "--mode", "prolog", "--root", os.path.join(fixtures, fx),
                         "--node", "n1", "--state-dir", state]), f"mrcheck-prolog --json --root {fx}")
check("chain", run([mrcheck, "chain", "--json"], (0,)), "chain")
# 3: every check skipped, nothing tested (k_probe_exit_skip, include/mrcheck/probe_protocol.h): a node without HCA.
check("probe-mr", run([mrcheck, "probe", "mr", "--json", "--timeout", "20s"], (0, 1, 3)), "probe mr")
check("probe-nccl", run([mrcheck, "probe", "nccl", "--json"], (0, 1)), "probe nccl")
check("probe-rdma", run([mrcheck, "probe", "rdma", "--json", "--timeout", "20s"], (0, 1, 3)), "probe rdma")
# The data-plane probe on the fake libibverbs' loopback (tests/fakes/fake_ibverbs_data.h): a pass with its sizes,
# a completion error and a RoCE port without a GID.
fake_verbs = os.path.join(build, "fakes", "lib", "libibverbs.so.1")
if os.path.exists(fake_verbs):
    # The last: node 1 of a two-node step whose pair cannot authenticate (no munged there): the JSON's pairs.
    step = {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_NODEID": "1", "SLURM_STEP_NODELIST": "127.0.0.[1-2]",
            "MRCHECK_MUNGE_SOCKET": "/nonexistent/munge.socket"}
    for what, extra, code in (("pass", {}, 0), ("IBV_WC_RETRY_EXC_ERR", {"MRCHECK_FAKE_IBV_WC": "RETRY_EXC_ERR"}, 1),
                              ("no GID", {"MRCHECK_FAKE_IBV_PORT": "eth,nogid"}, 1), ("a pair between nodes", step, 1)):
        env = {**os.environ, "MRCHECK_FAKE_IBV_DATA": "loopback", **extra}
        p = subprocess.run([mrcheck, "probe", "rdma", "--json", "--verbs-library", fake_verbs, "--sizes", "64,64K",
                            "--iters", "4"], capture_output=True, text=True, timeout=60, env=env)
        doc = json.loads(p.stdout) if p.returncode == code and p.stdout else None
        if doc is None:
            failures.append(f"probe rdma on the fake ({what}): exit {p.returncode}, wanted {code}: {p.stderr[:300]}")
        check("probe-rdma", doc, f"probe rdma on the fake ({what})")
# Six of the fake-verbs logs, and every real H100 log (healthy with a path note, the new causes, unknown ones).
logs = os.path.join(fixtures, "nccl_logs")
explained = [log for log in sorted(os.listdir(logs)) if log.endswith(".log")][:6]
explained += [os.path.join("gpu_h100", log) for log in sorted(os.listdir(os.path.join(logs, "gpu_h100")))
              if log.endswith(".log")]
for log in explained:
    check("explain", run([mrcheck, "explain", "--json", "--root", os.path.join(fixtures, "gpu_h200"),
                          os.path.join(logs, log)]), f"explain {log}")

# The schemas must be able to fail: wrong documents are rejected.
good = run([mrcheck, "report", "--json", "--root", os.path.join(fixtures, "matrix_hca_fw_old")])
if good is not None:
    bad_docs = {
        "no schema_version": lambda d: d.pop("schema_version"),
        "schema_version 2": lambda d: d.update(schema_version=2),
        "an action outside the list": lambda d: d["checks"][0].update(recommended_action="panic"),
        "no severity": lambda d: d["checks"][0].pop("severity"),
        "an unknown verdict": lambda d: d["checks"][0].update(verdict="ok"),
        "a stack without items": lambda d: d.update(stack={"boot_id": "x"}),
        "a stack value that is not a string": lambda d: d.update(stack={"items": {"kernel": 6}}),
    }
    for what, mutate in bad_docs.items():
        d = copy.deepcopy(good)
        mutate(d)
        if validator("report").is_valid(d):
            failures.append(f"report.schema.json accepts a document with {what}")
        else:
            print(f"ok: a report with {what} is rejected")
    # A report_dir file whose task's report did not reach the collector carries the verdicts only, with the
    # slurm object (prolog/admin_collect.cpp, write_report): valid; without facts and without slurm: not.
    verdicts_only = {k: copy.deepcopy(good[k]) for k in ("schema_version", "verdict", "checks")}
    verdicts_only["slurm"] = {"job_id": 7, "step": "step 0", "node": "node1", "node_id": 0, "nnodes": 1}
    check("report", verdicts_only, "a report_dir file with the verdicts only")
    verdicts_only.pop("slurm")
    if validator("report").is_valid(verdicts_only):
        failures.append("report.schema.json accepts a report with neither facts nor slurm")
    else:
        print("ok: a report with neither facts nor slurm is rejected")
    # Every failing check has an action other than none, every passing one none.
    for c in good["checks"]:
        if (c["verdict"] in ("fail", "warn")) == (c["recommended_action"] == "none"):
            failures.append(f"check {c['id']}: verdict {c['verdict']} with action {c['recommended_action']}")

for f in failures:
    print("FAIL:", f)
print(f"json_schema_test: {len(failures)} failed")
sys.exit(1 if failures else 0)
