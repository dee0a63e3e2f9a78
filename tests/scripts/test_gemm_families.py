#!/usr/bin/env python3
"""scripts/gemm_families.py on made-up GEMM records: family ratios, table order, exit codes."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from expectations import Expectations  # noqa: E402

SCRIPT = os.path.join(HERE, "..", "..", "scripts", "gemm_families.py")


def record(commit, pick_tflops, variants, label="case10 down bias+residual", dtype="fp16"):
    return {"kernel": "gemm", "dtype": dtype, "label": label, "commit": commit, "ours_tflops": pick_tflops,
            "variant": "sm90_pingpong_128x128x64_s6", "variants_tflops": variants}


def run(tmp, lines, *args):
    path = os.path.join(tmp, "kernels.jsonl")
    with open(path, "w") as f:
        f.write("".join(lines))
    r = subprocess.run([sys.executable, SCRIPT, path, *args], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def main():
    checks = Expectations("test_gemm_families")
    expect = checks.expect

    variants = {"sm90_pingpong_128x128x64_s6": 500.0, "sm90_pingpong_streamk2_128x128x64_s6": 400.0,
                "sm90_pingpong_cluster2_128x128x64_s6": 450.0, "sm90_coop_256x128x64_s4": 550.0,
                "sm90_coop_cluster2_streamk1_256x128x64_s4": 560.0, "sm90_coop_128x256x64_s4": 525.0,
                "sm90_pingpong_128x192x64_s4": 510.0, "sm90_pingpong_cluster2_128x192x64_s4": 490.0}
    with tempfile.TemporaryDirectory() as tmp:
        lines = [json.dumps(record("aaaa1111", 500.0, variants)) + "\n",
                 json.dumps({"kernel": "attention", "commit": "aaaa1111"}) + "\n",  # not a GEMM: skipped
                 json.dumps(record("bbbb2222", 600.0, variants)) + "\n",
                 json.dumps(dict(record("bbbb2222", 50.0, {}), dtype="fp32-ieee")) + "\n"]  # no variants
        rc, out, err = run(tmp, lines, "--commit", "bbbb", "--commit", "aaaa")
        expect("exit", rc, 0)
        body = [l.split() for l in out.splitlines() if l.startswith("case10")]
        expect("rows", len(body), 2)
        if len(body) == 2:
            # Tables in the order asked for; pairs 450/500 (not the 128 x 192 pairs), ping-pong
            # on 128 x 192 tiles (pairs included) 510/500, coop (pairs included) 560/500, the
            # 128 x 256 tiles 525/500, no wgmma tile, the pick over the fastest (600 -> 1).
            expect("first table", body[0][4], "bbbb")
            expect("families", body[1][5:], ["0.900", "1.020", "1.120", "1.050", "-", "0.893"])
            expect("pick capped at 1", body[0][-1], "1.000")
        expect("summary", "table aaaa: picks at 0.893" in out, True)
        expect("ieee row left out", "fp32-ieee" in out, False)

        # --alone reads the variants run alone instead (gemm_sustained records), and only them.
        sustained = {"kernel": "gemm_sustained", "dtype": "fp16", "label": "case13 up bias+gelu",
                     "commit": "dddd4444", "variant": "sm90_pingpong_128x192x64_s4", "ours": {"tflops": 540.0},
                     "variants_alone": {k: {"tflops": x * 1.1, "sm_mhz": 1400} for k, x in variants.items()}}
        rc, out, err = run(tmp, lines + [json.dumps(sustained) + "\n"], "--alone")
        expect("alone exit", rc, 0)
        body = [l.split() for l in out.splitlines() if l.startswith("case")]
        expect("alone rows", [b[:2] for b in body], [["case13", "up"]])
        if body:
            expect("alone families", body[0][5:], ["0.900", "1.020", "1.120", "1.050", "-", "0.877"])
        rc, out, err = run(tmp, lines, "--alone")
        expect("alone without sustained records exit", rc, 1)
        rc, out, err = run(tmp, [json.dumps(dict(sustained, ours=5)) + "\n"], "--alone")
        expect("alone bad record exit", rc, 2)
        expect("alone bad record one line", len(err.strip().splitlines()), 1)

        rc, out, err = run(tmp, lines, "--commit", "cccc")
        expect("no match exit", rc, 1)
        rc, out, err = run(tmp, ["{\"kernel\": \"gemm\", \"variants_tflops\": {\"a\": 1}}\n"])
        expect("missing field exit", rc, 2)
        expect("missing field message", err.strip().endswith(":1: GEMM record without \"label\""), True)
        rc, out, err = run(tmp, ["not json\n"])
        expect("bad JSON exit", rc, 2)
        expect("one line", len(err.strip().splitlines()), 1)
    r = subprocess.run([sys.executable, SCRIPT, "/nonexistent/kernels.jsonl"], capture_output=True, text=True)
    expect("unreadable exit", r.returncode, 2)
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
