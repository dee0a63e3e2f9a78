#!/usr/bin/env python3
"""Markdown summary of a results folder for the README: per case and dtype, the best
configuration and its speedup over the reference, the `auto` row's choice and latency, PyTorch's
best mode for the same case, dtype and math beside it with the ratio auto / PyTorch (from the
folder's peer_pytorch.jsonl, written by scripts/pytorch_peer.py on the same GPU right after the
sweep), and auto's accuracy (golden rel-L2 error beside the reference's, and whether it also
passes strict), then the sweep's accuracy.

fp32 is set against PyTorch in the math the sweep ran (the points' "math", else run.json's
fp32_math): TF32 against PyTorch with TF32 allowed, IEEE against PyTorch without it. Without a
peer file the table has no PyTorch columns, and a line above it says so.

  scripts/results_table.py results/h200
"""
import argparse
import json
import os
import sys
from collections import defaultdict

from json_lines import read_objects

PEER_FILE = "peer_pytorch.jsonl"


class UsageError(Exception):
    pass


def fmt_ms(v):
    if v is None:
        return "-"
    return f"{v:.3f}" if v < 10 else f"{v:.1f}"


def accuracy(r):
    """Golden rel-L2 of a row beside the reference's, and its verdicts, for a table cell."""
    if r is None or r.get("golden_rel_l2") is None:
        return "-"
    ref = r.get("golden_rel_l2_ref")
    ref_cell = f" ({ref:.1e})" if ref is not None else " (no reference)"
    verdict = "golden" if r.get("golden_pass") else "FAILS golden"
    if r.get("strict_pass"):
        verdict += " + strict"
    return f"{r['golden_rel_l2']:.1e}{ref_cell}, {verdict}"


def read_json_lines(path):
    try:
        return read_objects(path)
    except OSError as e:
        raise UsageError(f"{path}: {e.strerror}") from e
    except ValueError as e:
        raise UsageError(str(e)) from e


def read_peer(results):
    """PyTorch's rows by (case_id, dtype, math) from the folder's peer file, or None without one."""
    path = os.path.join(results, PEER_FILE)
    if not os.path.lexists(path):
        return None, path
    if os.path.islink(path) or not os.path.isfile(path):
        raise UsageError(f"{path}: not a regular file")
    peer = defaultdict(list)
    for n, r in read_json_lines(path):
        for key, kind in (("case_id", int), ("dtype", str), ("math", str), ("mode", str), ("status", str)):
            if not isinstance(r.get(key), kind) or isinstance(r.get(key), bool):
                raise UsageError(f"{path}:{n}: \"{key}\" missing or not {kind.__name__}")
        if r["status"] == "ok":
            ms = r.get("median_ms")
            if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not ms > 0:
                raise UsageError(f"{path}:{n}: an ok row needs a positive \"median_ms\"")
        peer[(r["case_id"], r["dtype"], r["math"])].append(r)
    return peer, path


def sweep_math(r, run_fp32_math):
    """The math a point ran, in the peer file's words: native for fp16/bf16, tf32 or ieee for fp32."""
    if r["dtype"] != "fp32":
        return "native"
    m = r.get("math")
    return m if m in ("tf32", "ieee") else run_fp32_math


def peer_cells(rows, auto_ms):
    """(PyTorch cell, ratio cell) from PyTorch's rows of one (case, dtype, math)."""
    ok = [r for r in rows if r["status"] == "ok"]
    if not ok:
        return ("oom" if any(r["status"] == "oom" for r in rows) else "-"), "-"
    best = min(ok, key=lambda r: r["median_ms"])
    ratio = f"{auto_ms / best['median_ms']:.2f}" if auto_ms else "-"
    # PyTorch's fast path computes the tanh GELU where the case asks for the exact one
    # (pytorch_peer.py probes it): its time stays the one to beat, marked.
    tanh = ", tanh GELU" if best.get("ffn_gelu") == "tanh" else ""
    return f"{fmt_ms(best['median_ms'])} ({best['mode']}{tanh})", ratio


def versions(peer):
    seen = []
    for rows in peer.values():
        for r in rows:
            v = (r.get("gpu") or r.get("device") or "?", r.get("torch") or "?", r.get("cudnn") or "-")
            if v not in seen:
                seen.append(v)
    return "; ".join(f"torch {t}, cuDNN {c}, on {g}" for g, t, c in seen)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", help=f"a results folder (points.jsonl, run.json and, if measured, {PEER_FILE})")
    args = ap.parse_args(argv)
    try:
        rows = [r for _, r in read_json_lines(os.path.join(args.results, "points.jsonl"))]
        peer, peer_path = read_peer(args.results)
        run = {}
        run_path = os.path.join(args.results, "run.json")
        if os.path.isfile(run_path):
            try:
                with open(run_path) as f:
                    run = json.load(f)
            except (OSError, json.JSONDecodeError) as e:
                raise UsageError(f"{run_path}: not readable JSON ({e})") from e
    except UsageError as e:
        print(f"results_table: {e}", file=sys.stderr)
        return 2
    options = run.get("options") if isinstance(run.get("options"), dict) else {}
    run_fp32_math = options.get("fp32_math") or run.get("fp32_math") or "tf32"
    device = run.get("device") if isinstance(run.get("device"), dict) else run.get("gpu")
    sweep_gpu = device.get("name") if isinstance(device, dict) else None

    groups = defaultdict(list)
    names = {}
    for r in rows:
        groups[(r["case_id"], r["dtype"])].append(r)
        names[r["case_id"]] = r["case_name"]

    def measured(r):
        return r.get("speedup") is not None and r["status"] not in ("nonviable", "oom", "error")

    maths = sorted({sweep_math(r, run_fp32_math) for r in rows if r.get("dtype") == "fp32"})
    if peer is None:
        print(f"No {PEER_FILE} in {args.results}: PyTorch was not measured beside this sweep "
              "(scripts/pytorch_peer.py writes it), so the table has no PyTorch column.")
    else:
        fp32 = f"; fp32 in the sweep's math ({', '.join(maths)})" if maths else ""
        print(f"PyTorch: the best of its modes per case, dtype and math from {peer_path} "
              f"({versions(peer)}){fp32}. auto / PyTorch is the ratio of forward times: below 1, auto is faster.")
        peer_gpus = {r.get("gpu") for g in peer.values() for r in g}
        if sweep_gpu and peer_gpus != {sweep_gpu}:
            print(f"Note: the sweep ran on {sweep_gpu}, PyTorch on {', '.join(sorted(map(str, peer_gpus)))}: "
                  "the ratios compare different machines.")
        ok_rows = [r for g in peer.values() for r in g if r.get("status") == "ok"]
        if any(r.get("ffn_gelu") == "tanh" for r in ok_rows):
            print("Note: PyTorch's native fast path (modes fastpath, fastpath_graph) computes the FFN's GELU "
                  "as the tanh approximation, fused into cuBLASLt's epilogue, where the model asks for the "
                  "exact erf GELU that tlbench computes; a cell marked \"tanh GELU\" is such a mode.")
        if ok_rows and not any(isinstance(r.get("settled"), bool) for r in ok_rows):
            print("Note: PyTorch was timed in bursts (each mode after 25 ms of warm-up, by a "
                  "pytorch_peer.py older than --settle-s), at a higher clock than the sweep's points "
                  "hold under the card's power cap: the ratios favour PyTorch on the long forwards.")
    print()
    pytorch_head = " PyTorch best ms (mode) | auto / PyTorch |" if peer is not None else ""
    print(f"| case | dtype | best configuration | speedup vs baseline | best ms | auto (chose) | auto ms |{pytorch_head}"
          " auto accuracy: golden rel-L2 (reference's) |")
    print("|---" * (10 if peer is not None else 8) + "|")
    dtype_order = {"fp16": 0, "bf16": 1, "fp32": 2}
    for (case, dtype) in sorted(groups, key=lambda k: (k[0], dtype_order.get(k[1], 9))):
        g = groups[(case, dtype)]
        fixed = [r for r in g if measured(r) and r["config"] != "auto" and r.get("golden_pass")]
        auto = next((r for r in g if r["config"] == "auto" and measured(r)), None)
        if not fixed:
            continue
        best = max(fixed, key=lambda r: r["speedup"])
        base = best.get("baseline", "00000")
        vs = "" if base == "00000" else f" (vs {base})"
        ci = f" [{best['speedup_ci_low']:.2f}, {best['speedup_ci_high']:.2f}]" if best.get("speedup_ci_low") else ""
        auto_cell = f"{auto.get('auto_choice', '?')}" if auto else "-"
        auto_ms = fmt_ms(auto["cand_ms"]) if auto else "-"
        pytorch = ""
        if peer is not None:
            math = sweep_math(auto or best, run_fp32_math)
            cell, ratio = peer_cells(peer.get((case, dtype, math), []), auto["cand_ms"] if auto else None)
            pytorch = f" {cell} | {ratio} |"
        print(f"| {case} {names[case]} | {dtype} | {best['config']} {best['config_names']} | "
              f"{best['speedup']:.2f}{ci}{vs} | {fmt_ms(best['cand_ms'])} | {auto_cell} | {auto_ms} |{pytorch} "
              f"{accuracy(auto)} |")

    viable = [r for r in rows if measured(r)]
    golden = sum(1 for r in viable if r.get("golden_pass"))
    strict = sum(1 for r in viable if r.get("strict_pass"))
    nonviable = sum(1 for r in rows if r["status"] == "nonviable")
    print()
    print(f"Accuracy: {golden} of {len(viable)} measured points pass the golden criterion, "
          f"{strict} also pass strict; {nonviable} points nonviable (never attempted).")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
