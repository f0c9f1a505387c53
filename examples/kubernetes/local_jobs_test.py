#!/usr/bin/env python3
"""Runs the containers of examples/kubernetes/ here, as their pods would run them, without a
cluster: every index of the Indexed Job (JOB_COMPLETION_INDEX 0..completions-1, each pod's
command and args in sh, with the Job's env and the source and output moved to a temporary
folder), then the merge Job's; the merged archive must be byte for byte the single-process
conversion's, and the parts removed. What is not tested here: the scheduling, the volume, the
image.

    local_jobs_test.py IRIS_BINARY SNAPSHOT

Exit 0: passed; 1: failed; 77: skipped (no PyYAML: Debian python3-yaml), saying why."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import yaml
except ImportError:
    print("local_jobs_test: skipped: PyYAML is missing (Debian: python3-yaml)")
    sys.exit(77)

here = Path(__file__).resolve().parent
iris, source = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()


def container(job):
    return job["spec"]["template"]["spec"]["containers"][0]


def env_of(c, base):
    env = dict(base)
    env.update({e["name"]: e["value"] for e in c.get("env", [])})
    return env


with tempfile.TemporaryDirectory() as tmp:
    tmp = Path(tmp)
    (tmp / "bin").mkdir()
    (tmp / "bin" / "iris").symlink_to(iris)
    base = dict(os.environ, PATH=f"{tmp / 'bin'}:{os.environ['PATH']}")
    parts_job = yaml.safe_load((here / "convert-parts.yaml").read_text())
    merge_job = yaml.safe_load((here / "merge.yaml").read_text())
    assert parts_job["spec"]["completionMode"] == "Indexed"
    c = container(parts_job)
    env = env_of(c, base)
    out = tmp / "out" / Path(env["OUT"]).name
    out.parent.mkdir()
    env.update(SRC=str(source), OUT=str(out))
    for i in range(parts_job["spec"]["completions"]):
        subprocess.run(c["command"] + c["args"], env=dict(env, JOB_COMPLETION_INDEX=str(i)), check=True)
    m = container(merge_job)
    menv = env_of(m, base)
    assert menv["OUT"] == env_of(c, {})["OUT"] and menv["PARTS"] == env_of(c, {})["PARTS"], "the two Jobs name different archives"
    menv["OUT"] = str(out)
    subprocess.run(m["command"] + m["args"], env=menv, check=True)
    single = tmp / "single.iris"
    subprocess.run([str(iris), "convert", str(source), "-o", str(single), "-q"] + env["OPTIONS"].split(), check=True)
    leftovers = sorted(p.name for p in out.parent.iterdir() if p != out)
    if out.read_bytes() != single.read_bytes() or leftovers:
        print(f"local_jobs_test: FAILED: merged archive differs from the single conversion, or parts left: {leftovers}")
        sys.exit(1)
    print(f"local_jobs_test: passed: {parts_job['spec']['completions']} indexed pods and the merge Job gave the "
          "single-process archive byte for byte")
