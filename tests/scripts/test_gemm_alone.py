#!/usr/bin/env python3
"""scripts/gemm_alone.py on made-up sustained GEMM records: figures, A/B, exit codes."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from expectations import Expectations  # noqa: E402

SCRIPT = os.path.join(HERE, "..", "..", "scripts", "gemm_alone.py")


def run_of(tflops, mhz, watts, events=None):
    r = {"tflops": tflops, "sm_mhz": mhz, "mj": 1.0, "watts": watts}
    if events is not None:
        r["clock_events"] = events
    return r


def record(commit, ratio, label="case12 up bias+gelu", dtype="fp16", variant="sm90_pingpong_128x128x64_s6",
           events=None):
    return {"kernel": "gemm_sustained", "dtype": dtype, "label": label, "variant": variant, "commit": commit,
            "ratio": ratio, "ours": run_of(500.0, 1400, 600, events),
            "cublas_before": run_of(600.0, 1500, 700, {"sw_power_cap": 0.95}),
            "cublas_after": run_of(640.0, 1700, 740, {"sw_power_cap": 0.9, "hw_slowdown": 0.05})}


def run(tmp, lines, *args):
    path = os.path.join(tmp, "kernels.jsonl")
    with open(path, "w") as f:
        f.write("".join(json.dumps(x) + "\n" if isinstance(x, dict) else x for x in lines))
    r = subprocess.run([sys.executable, SCRIPT, path, *args], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def main():
    checks = Expectations("test_gemm_alone")
    expect = checks.expect

    with tempfile.TemporaryDirectory() as tmp:
        lines = [record("aaaa1111", 0.80, events={"hw_slowdown": 0.6, "sw_power_cap": 0.05}),
                 {"kernel": "gemm", "commit": "aaaa1111"},  # a table row in turns: not read here
                 record("aaaa1111", 0.90, label="case13 up bias+gelu", variant="sm90_pingpong_128x192x64_s4",
                        events={}),
                 record("bbbb2222", 0.76),
                 record("bbbb2222", 0.84, label="case13 up bias+gelu", variant="sm90_coop_256x128x64_s4")]
        rc, out, err = run(tmp, lines, "--commit", "aaaa")
        expect("exit", rc, 0)
        rows = [l for l in out.splitlines() if l.startswith("case")]
        expect("rows", len(rows), 2)
        if rows:
            cols = rows[0].split()
            # ratio, clock ours and cuBLAS's mean (1500 and 1700), power ours and cuBLAS's mean,
            # TFLOP/s a GHz: 500 / 1.4 and 620 / 1.6.
            expect("figures", cols[4:11], ["0.800", "1400", "1600", "600", "720", "357", "388"])
            # Reasons under a tenth of the run are left out; cuBLAS's are shown after ours.
            expect("events", rows[0].split("  ")[-1].strip(),
                   "hw_slowdown 60% | sw_power_cap 95%, sw_power_cap 90%")
            expect("no reason active", rows[1].split("  ")[-1].strip().startswith("none |"), True)
        expect("summary", "fp16: ours/cuBLAS 0.849 (geometric mean of 2)" in out, True)
        expect("medians", "median clock 1400 against 1600 MHz, median power 600 against 720 W" in out, True)
        expect("one table", "table bbbb" in out, False)

        # Records without clock events (before they were recorded) print "-" for them.
        old = record("cccc3333", 0.9)
        for run_name in ("ours", "cublas_before", "cublas_after"):
            old[run_name].pop("clock_events", None)
        rc, out, err = run(tmp, [old])
        expect("without events exit", rc, 0)
        expect("without events", [l.split("  ")[-1].strip() for l in out.splitlines() if l.startswith("case")],
               ["- | -, -"])

        # A/B: the first table over the base, GEMM by GEMM, by dtype and the pick's family.
        rc, out, err = run(tmp, lines, "--commit", "aaaa", "--base", "bbbb")
        expect("ab exit", rc, 0)
        ab = [l.split() for l in out.splitlines() if l.startswith("case")]
        expect("ab rows", [r[6] for r in ab], ["1.053", "1.071"])
        expect("ab family", "fp16 pingpong: 1.053 over 1 GEMMs" in out, True)
        expect("ab other variant named", "base sm90_coop_256x128x64_s4" in out, True)
        expect("ab dtype", "fp16: 1.062 over 2 GEMMs" in out, True)

        # A build of a changed tree is a table of its own ("-dirty"), which --base can name.
        dirty = [record("aaaa1111-dirty", 0.88), record("aaaa1111-dirty", 0.99, label="case13 up bias+gelu")]
        rc, out, err = run(tmp, lines + dirty, "--commit", "aaaa1111-dirty", "--base", "aaaa1111")
        expect("dirty over clean exit", rc, 0)
        expect("dirty over clean", [l.split()[6] for l in out.splitlines() if l.startswith("case")],
               ["1.100", "1.100"])
        rc, out, err = run(tmp, lines + dirty, "--commit", "aaaa")
        expect("both tables printed", ("table aaaa1111\n" in out, "table aaaa1111-dirty\n" in out), (True, True))

        # A later record of the same GEMM in a table replaces the earlier one.
        rc, out, err = run(tmp, lines + [record("aaaa1111", 0.5)], "--commit", "aaaa")
        expect("last record counts", "0.500" in out and "0.800" not in out, True)

        rc, out, err = run(tmp, lines, "--commit", "dddd")
        expect("no table exit", rc, 1)
        rc, out, err = run(tmp, lines, "--commit", "aaaa", "--base", "dddd")
        expect("no base exit", rc, 1)
        rc, out, err = run(tmp, lines, "--base", "aaaa")
        expect("base without commit exit", rc, 2)
        bad = record("aaaa1111", 0.8)
        bad["ours"]["sm_mhz"] = "fast"
        rc, out, err = run(tmp, [bad])
        expect("bad clock exit", rc, 2)
        expect("bad clock message", err.strip().endswith(":1: \"ours\".\"sm_mhz\" is not a number or null"), True)
        rc, out, err = run(tmp, [dict(record("aaaa1111", 0.8), label=None)])
        expect("label not a string exit", rc, 2)
        rc, out, err = run(tmp, [dict(record("aaaa1111", 0.8), ratio=True)])
        expect("ratio a boolean exit", rc, 2)
        missing = record("aaaa1111", 0.8)
        del missing["cublas_after"]
        rc, out, err = run(tmp, [missing])
        expect("missing run exit", rc, 2)
        expect("missing run one line", len(err.strip().splitlines()), 1)
        rc, out, err = run(tmp, ["not json\n"])
        expect("bad JSON exit", rc, 2)
    r = subprocess.run([sys.executable, SCRIPT, "/nonexistent/kernels.jsonl"], capture_output=True, text=True)
    expect("unreadable exit", r.returncode, 2)
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
