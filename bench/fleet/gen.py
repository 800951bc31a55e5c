#!/usr/bin/env python3
"""Writes N node reports for `mrcheck fleet`: copies of a passing report with a few outliers taken from a failing
one, each renamed to its node (nodeNNN, zero-padded), the way `mrcheck report --json` writes them.

usage: gen.py GOOD.json BAD.json OUTDIR N OUTLIER,OUTLIER,...   (outliers as node numbers, e.g. 17,33,50)
"""
import json
import os
import sys

good_path, bad_path, out, n, outliers = sys.argv[1:6]
n = int(n)
bad_nodes = {int(x) for x in outliers.split(",") if x}
good = json.load(open(good_path))
bad = json.load(open(bad_path))
width = max(3, len(str(n)))
os.makedirs(out, exist_ok=True)
for i in range(1, n + 1):
    j = bad if i in bad_nodes else good
    name = f"node{i:0{width}d}"
    j["stack"]["host"] = name
    j["facts"]["hostname"] = name
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump(j, f, indent=2, sort_keys=True)
