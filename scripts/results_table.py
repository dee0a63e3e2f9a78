#!/usr/bin/env python3
"""Markdown summary of a results folder for the README: per case and dtype, the best
configuration and its speedup over the reference, the `auto` row's choice and latency beside
PyTorch's best on the same GPU (configs/pytorch-h200.json) and its accuracy (golden rel-L2
error beside the reference's, and whether it also passes strict), then the sweep's accuracy.

  scripts/results_table.py results/h200 [--pytorch configs/pytorch-h200.json]
"""
import argparse
import json
import os
import sys
from collections import defaultdict


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


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results")
    ap.add_argument("--pytorch", default=os.path.join(os.path.dirname(__file__), "..", "configs", "pytorch-h200.json"))
    args = ap.parse_args(argv)
    path = os.path.join(args.results, "points.jsonl")
    try:
        rows = [json.loads(line) for line in open(path) if line.strip()]
    except OSError as e:
        print(f"results_table: {e}", file=sys.stderr)
        return 2
    torch_ms = json.load(open(args.pytorch))["ms"] if os.path.exists(args.pytorch) else {}

    groups = defaultdict(list)
    names = {}
    for r in rows:
        groups[(r["case_id"], r["dtype"])].append(r)
        names[r["case_id"]] = r["case_name"]

    def measured(r):
        return r.get("speedup") is not None and r["status"] not in ("nonviable", "oom", "error")

    print("| case | dtype | best configuration | speedup vs baseline | best ms | auto (chose) | auto ms | PyTorch ms "
          "| auto accuracy: golden rel-L2 (reference's) |")
    print("|---|---|---|---|---|---|---|---|---|")
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
        pt = torch_ms.get(dtype, {}).get(str(case))
        print(f"| {case} {names[case]} | {dtype} | {best['config']} {best['config_names']} | "
              f"{best['speedup']:.2f}{ci}{vs} | {fmt_ms(best['cand_ms'])} | {auto_cell} | {auto_ms} | {fmt_ms(pt)} "
              f"| {accuracy(auto)} |")

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
