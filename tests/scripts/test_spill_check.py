#!/usr/bin/env python3
"""scripts/spill_check.py on made-up build logs: names, sums, budgets and exit codes."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from expectations import Expectations  # noqa: E402

SCRIPT = os.path.join(HERE, "..", "..", "scripts", "spill_check.py")
# void tlb::(anonymous namespace)::k<2>(float const*, int), spilling in two compilations.
MANGLED = "_ZN3tlb12_GLOBAL__N_11kILi2EEEvPKfi"
KEY = "tlb::k<2>"


def warning(name, stores, loads):
    return (f"ptxas warning : Registers are spilled to local memory in function '{name}', "
            f"{stores} bytes spill stores, {loads} bytes spill loads\n")


def run(tmp, log_lines, budget):
    log = os.path.join(tmp, "build.log")
    with open(log, "w") as f:
        f.write("[1/2] Building CUDA object x.cu.o\n" + "".join(log_lines))
    path = os.path.join(tmp, "budget.json")
    with open(path, "w") as f:
        json.dump(budget, f)
    r = subprocess.run([sys.executable, SCRIPT, log, "--budget", path], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def main():
    checks = Expectations("test_spill_check")
    expect = checks.expect

    with tempfile.TemporaryDirectory() as tmp:
        lines = [warning(MANGLED, 8, 8), warning(MANGLED, 24, 40)]  # the larger one counts: 64
        rc, out = run(tmp, lines, {KEY: 64})
        expect("within budget", rc, 0)
        rc, out = run(tmp, lines, {KEY: 63})
        expect("one byte over", rc, 1)
        expect("over names the kernel", KEY in out, True)
        rc, out = run(tmp, lines, {})
        expect("no budget entry", rc, 1)
        rc, out = run(tmp, [], {})
        expect("no spills", rc, 0)
        # --write records the log's spills under the same key.
        log = os.path.join(tmp, "build.log")
        with open(log, "w") as f:
            f.write("".join(lines))
        path = os.path.join(tmp, "written.json")
        subprocess.run([sys.executable, SCRIPT, log, "--budget", path, "--write"], check=True, capture_output=True)
        with open(path) as f:
            expect("written budget", json.load(f), {KEY: 64})
        missing = subprocess.run([sys.executable, SCRIPT, os.path.join(tmp, "none.log")], capture_output=True)
        expect("missing log", missing.returncode, 2)
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
