#!/usr/bin/env python3
"""Score `mrcheck explain` against a held-out log set (a directory of tests/corpus/heldout-*).

usage: score.py MRCHECK_BINARY DIR [--verbose] [-- EXTRA_EXPLAIN_ARGS...]

  MRCHECK_BINARY  path to the built mrcheck (e.g. build/cli/mrcheck)
  DIR             the directory holding MANIFEST and the *.log excerpts
  --verbose       also print the summary line of each finding
  -- ARGS         passed to `explain` after the file (e.g. -- --root /path/to/dump)

For each MANIFEST row (file failure cause library confirmed) it runs
`MRCHECK_BINARY explain --json FILE`; if --json is refused (usage error naming the option,
or output that is not JSON) it runs `MRCHECK_BINARY explain FILE` and reads the text form
("N. <cause>[ (likely)] - <title>" lines).

Counting:
  failure right  failure=yes: exit status 1 or at least one finding;
                 failure=no:  exit status 0 and no finding.
  cause right    failure=no:  same as failure right (no finding);
                 cause=unknown: any failure reported (any cause, including explain's own "unknown");
                 otherwise: the expected cause (or one of its aliases below) is among the causes/ids
                 of the reported findings.
Prints one line per file (expected vs got), then totals per library, for the confirmed rows only,
and overall. Exit status: 0 when every row could be run, 2 on a usage or set-up error.
"""
import json
import os
import re
import signal
import subprocess
import sys
from collections import OrderedDict

# Held-out vocabulary -> names explain may use for the same cause (docs/schema/explain.schema.json
# lists explain's own enum). Every name also matches itself.
ALIASES = {
    "memlock": {"memlock"},
    "gpu_peer_memory": {"gpu_peer_memory", "dmabuf_unsupported", "gpu_peer_limit"},
    "duplicate_gpu": {"duplicate_gpu"},
    "socket_interface": {"socket_interface"},
    "no_rdma_device": {"no_rdma_device"},
    "gpu_out_of_memory": {"gpu_out_of_memory"},
    "host_out_of_memory": {"host_out_of_memory", "pinning_resources"},
    "max_map_count": {"max_map_count"},
    "too_many_open_files": {"too_many_open_files", "open_files"},
    "stack_limit": {"stack_limit"},
    "imex_mnnvl": {"imex_mnnvl", "imex_channel"},
    "firmware_or_stack_mismatch": {"firmware_or_stack_mismatch", "rdma_stack_mismatch"},
    "network": {"network", "network_unreachable", "timeout"},
    "port_down": {"port_down"},
    "gid": {"gid"},
    "efa_limit": {"efa_limit", "hca_resources"},
    "cuda_error": {"cuda_error"},
    "invalid_usage": {"invalid_usage"},
    "remote_error": {"remote_error"},
}

TEXT_FINDING = re.compile(r"^\s*\d+\.\s+([A-Za-z0-9_]+)(\s+\(likely\))?\s+-\s")
TIMEOUT_S = 30


def usage(msg=None):
    if msg:
        print(f"score.py: {msg}", file=sys.stderr)
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    sys.exit(2)


def read_manifest(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) < 5:
                print(f"score.py: {path}:{n}: expected 5 columns, got {len(parts)}: {line}", file=sys.stderr)
                sys.exit(2)
            file, failure, cause, library, confirmed = parts[:5]
            rows.append({"file": file, "failure": failure == "yes", "cause": cause,
                         "library": library, "confirmed": confirmed == "yes"})
    return rows


def find_findings(doc):
    """The list of finding objects, wherever the JSON keeps it."""
    if isinstance(doc, list):
        if all(isinstance(x, dict) for x in doc) and any("cause" in x or "id" in x for x in doc):
            return doc
        for x in doc:
            r = find_findings(x)
            if r is not None:
                return r
        return None
    if isinstance(doc, dict):
        for key in ("findings", "results", "failures", "diagnoses"):
            v = doc.get(key)
            if isinstance(v, list):
                return [x for x in v if isinstance(x, dict)]
        for v in doc.values():
            if isinstance(v, (dict, list)):
                r = find_findings(v)
                if r is not None:
                    return r
    return None


def finding_causes(f):
    out = []
    for key in ("cause", "id", "cause_id", "rule", "diagnosis"):
        v = f.get(key)
        if isinstance(v, str) and v:
            out.append(v)
        elif isinstance(v, dict):
            for k2 in ("cause", "id", "name"):
                if isinstance(v.get(k2), str):
                    out.append(v[k2])
    v = f.get("causes")
    if isinstance(v, list):
        out += [c for c in v if isinstance(c, str)]
    return out


def finding_summary(f):
    for key in ("summary", "example", "title", "text"):
        if isinstance(f.get(key), str):
            return f[key]
    return ""


def run(cmd):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT_S)
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        return None, "", f"timed out after {TIMEOUT_S} s"
    except OSError as e:
        return None, "", str(e)


class Explainer:
    def __init__(self, binary, extra):
        self.binary = binary
        self.extra = extra
        self.json_ok = None  # unknown until the first run

    def explain(self, path):
        """-> (exit status, [causes per finding], [summaries], mode, error)"""
        if self.json_ok is not False:
            rc, out, err = run([self.binary, "explain", "--json", path] + self.extra)
            if rc is not None:
                doc = None
                try:
                    doc = json.loads(out) if out.strip() else None
                except ValueError:
                    doc = None
                refused = (doc is None and rc == 2 and ("--json" in err or "unknown" in err.lower()
                                                        or "usage" in err.lower()))
                if doc is not None:
                    self.json_ok = True
                    findings = find_findings(doc) or []
                    return rc, [finding_causes(f) for f in findings], [finding_summary(f) for f in findings], \
                        "json", None
                if refused or (rc in (0, 1) and self.json_ok is None):
                    self.json_ok = False
                else:
                    return rc, [], [], "json", (err.strip() or "no JSON on stdout")[:200]
            else:
                return None, [], [], "json", err
        rc, out, err = run([self.binary, "explain", path] + self.extra)
        if rc is None:
            return None, [], [], "text", err
        causes, sums = [], []
        for line in out.splitlines():
            m = TEXT_FINDING.match(line)
            if m:
                causes.append([m.group(1)])
                sums.append(line.strip())
        err_msg = None if rc in (0, 1) else (err.strip() or f"exit {rc}")[:200]
        return rc, causes, sums, "text", err_msg


def judge(row, rc, causes):
    reported = (rc == 1) or bool(causes)
    clean = (rc == 0) and not causes
    all_causes = {c for fc in causes for c in fc}
    if not row["failure"]:
        fail_ok = clean
        cause_ok = clean
    else:
        fail_ok = reported
        if row["cause"] == "unknown":
            cause_ok = reported
        else:
            want = ALIASES.get(row["cause"], set()) | {row["cause"]}
            cause_ok = bool(all_causes & want)
    return fail_ok, cause_ok


def main(argv):
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    args = argv[1:]
    extra = []
    if "--" in args:
        i = args.index("--")
        args, extra = args[:i], args[i + 1:]
    verbose = False
    if "--verbose" in args:
        verbose = True
        args.remove("--verbose")
    if len(args) != 2 or args[0] in ("-h", "--help"):
        usage()
    binary, d = args
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        usage(f"{binary}: not an executable file")
    manifest = os.path.join(d, "MANIFEST")
    if not os.path.isfile(manifest):
        usage(f"{manifest}: no such file")
    rows = read_manifest(manifest)
    ex = Explainer(os.path.abspath(binary), extra)

    per_lib = OrderedDict()
    totals = {"all": [0, 0, 0], "confirmed": [0, 0, 0]}  # rows, failure right, cause right
    errors = 0
    w = max(len(r["file"]) for r in rows)
    for row in rows:
        path = os.path.join(d, row["file"])
        if not os.path.isfile(path):
            print(f"{row['file']:<{w}}  MISSING FILE")
            errors += 1
            continue
        rc, causes, sums, mode, err = ex.explain(path)
        if rc is None or err:
            errors += 1
        fail_ok, cause_ok = judge(row, rc, causes)
        exp = f"{'fail' if row['failure'] else 'ok'}/{row['cause']}"
        got_causes = ",".join(c[0] if c else "?" for c in causes) or "-"
        got = f"exit={rc if rc is not None else 'ERR'} findings={len(causes)} causes={got_causes}"
        mark = f"failure:{'OK' if fail_ok else 'WRONG'} cause:{'OK' if cause_ok else 'WRONG'}"
        note = f"  [{mode}{': ' + err if err else ''}]" if (err or mode != "json") else ""
        print(f"{row['file']:<{w}}  expected {exp:<32} got {got:<60} {mark}{note}")
        if verbose:
            for s in sums:
                print(f"{'':<{w}}    - {s[:160]}")
        lib = per_lib.setdefault(row["library"], [0, 0, 0])
        for t in [lib, totals["all"]] + ([totals["confirmed"]] if row["confirmed"] else []):
            t[0] += 1
            t[1] += fail_ok
            t[2] += cause_ok

    def pct(a, b):
        return f"{100.0 * a / b:5.1f}%" if b else "  n/a"

    print()
    print(f"{'library':<16} {'rows':>4}  {'failure right':>18}  {'cause right':>18}")
    for lib, (n, f, c) in per_lib.items():
        print(f"{lib:<16} {n:>4}  {f:>4}/{n:<4} {pct(f, n)}  {c:>4}/{n:<4} {pct(c, n)}")
    for label, key in (("confirmed only", "confirmed"), ("TOTAL", "all")):
        n, f, c = totals[key]
        print(f"{label:<16} {n:>4}  {f:>4}/{n:<4} {pct(f, n)}  {c:>4}/{n:<4} {pct(c, n)}")
    healthy = [r for r in rows if not r["failure"]]
    print(f"\n{len(rows)} rows ({len(rows) - len(healthy)} failure, {len(healthy)} healthy); "
          f"explain output read as {'JSON' if ex.json_ok else 'text' if ex.json_ok is False else 'n/a'}")
    if errors:
        print(f"score.py: {errors} row(s) could not be run cleanly (see [..] notes)", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
