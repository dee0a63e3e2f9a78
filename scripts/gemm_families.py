#!/usr/bin/env python3
"""The GEMM table's rows by variant family, for deciding how the dispatcher ranks them.

    scripts/gemm_families.py KERNELS.jsonl [--commit PREFIX ...] [--alone]

KERNELS.jsonl holds `tlbench_kernel_bench gemm` records (results/<gpu>/kernels.jsonl, or a
call's kernels.jsonl): per GEMM, the pick's TFLOP/s and every big-grid variant's, timed in
turns. The rules of gemm_dispatch.cpp compare families of variants, not single variants, and
only where several tables on several cards agree; this prints, per GEMM and per table
(commit), each family's best variant over ping-pong's best (the family picked most often) and
the pick over the row's fastest variant. Families: ping-pong on 128 x 128 tiles, the same
in pairs (`…_cluster2_…`), ping-pong on 128 x 192 tiles (pairs included), cooperative on
256 x 128 tiles and on 128 x 256 tiles (pairs included), and the one-tile-per-CTA wgmma tiles. With --commit, only the tables of those commits (a
prefix each, in that order); without, every table in the file. Rows without
`variants_tflops` (fp32 IEEE's, which have none timed beside the pick) are left out.
With --alone the same from `gemm --energy-variants`'s "gemm_sustained" records: every
variant run alone, as in a job of its own, instead of in turns (on a card held at its power
limit the turns share one clock out among the variants; alone each holds its own).

Exit 0 with at least one row printed; 1 when no row matched; 2 on bad input (one line naming
the file and the line).
"""
import argparse
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from json_lines import read_objects  # noqa: E402

FAMILIES = [
    ("pairs", lambda v: "_pingpong_cluster2_" in v and re.search(r"_128x128x\d+_", v) is not None),
    ("pp192", lambda v: "_pingpong_" in v and re.search(r"_128x192x\d+_", v) is not None),
    ("coop", lambda v: "_coop_" in v and re.search(r"_256x128x\d+_", v) is not None),
    ("wide", lambda v: "_coop_" in v and re.search(r"_128x256x\d+_", v) is not None),
    ("wgmma", lambda v: v.startswith("sm90_wgmma_")),
]


def is_pingpong(v):
    return v.startswith("sm90_pingpong_") and "_cluster2_" not in v and re.search(r"_128x128x\d+_", v) is not None


def family_of(v):
    """The family a variant belongs to: "pingpong" (the baseline above), one of FAMILIES, or
    "other"."""
    if is_pingpong(v):
        return "pingpong"
    return next((name for name, member in FAMILIES if member(v)), "other")


def load(path, alone=False):
    """The GEMM records of `path` that carry variants, timed in turns ("gemm") or alone
    ("gemm_sustained", as the same fields); ValueError or OSError on bad input."""
    rows = []
    for n, r in read_objects(path):
        if alone:
            if r.get("kernel") != "gemm_sustained" or not r.get("variants_alone"):
                continue
            try:
                r = dict(r, ours_tflops=r["ours"]["tflops"],
                         variants_tflops={k: v["tflops"] for k, v in r["variants_alone"].items()})
            except (KeyError, TypeError, AttributeError):
                raise ValueError(f"{path}:{n}: sustained GEMM record without \"ours\" or a variant's \"tflops\"")
        elif r.get("kernel") != "gemm" or not r.get("variants_tflops"):
            continue
        for key in ("label", "dtype", "commit", "ours_tflops", "variant"):
            if key not in r:
                raise ValueError(f"{path}:{n}: GEMM record without \"{key}\"")
        rows.append(r)
    return rows


def family_ratios(r):
    """Each family's best over ping-pong's best (None where the family has no variant), and
    the pick over the row's fastest variant (at most 1: the pick is timed on its own too)."""
    v = r["variants_tflops"]
    pingpong = max((x for k, x in v.items() if is_pingpong(k)), default=0.0)
    out = {}
    for name, member in FAMILIES:
        best = max((x for k, x in v.items() if member(k)), default=0.0)
        out[name] = best / pingpong if best > 0 and pingpong > 0 else None
    fastest = max(v.values())
    out["pick"] = min(1.0, r["ours_tflops"] / fastest) if fastest > 0 else None
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernels")
    ap.add_argument("--commit", action="append", default=[], help="a table's commit (prefix); repeatable")
    ap.add_argument("--alone", action="store_true", help="the variants run alone (gemm_sustained records)")
    a = ap.parse_args()
    try:
        rows = load(a.kernels, a.alone)
    except ValueError as e:
        print(f"gemm_families: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"gemm_families: {a.kernels}: cannot read ({e.strerror})", file=sys.stderr)
        return 2

    def table_of(r):
        if not a.commit:
            return r["commit"][:12]
        for c in a.commit:
            if r["commit"].startswith(c):
                return c
        return None

    tables = []  # in the order asked for, or of first appearance
    by_row = {}
    for r in rows:
        t = table_of(r)
        if t is None:
            continue
        if t not in tables:
            tables.append(t)
        key = (r["label"], r["dtype"])
        by_row.setdefault(key, {})[t] = family_ratios(r)
    if a.commit:
        tables = [c for c in a.commit if c in tables]
    if not by_row:
        print(f"gemm_families: no GEMM record with variants{' alone' if a.alone else ''} matched", file=sys.stderr)
        return 1

    def cell(x):
        return "  -  " if x is None else f"{x:.3f}"

    names = [n for n, _ in FAMILIES] + ["pick"]
    print(f"{'GEMM':<34} {'table':<12} " + " ".join(f"{n:>6}" for n in names))
    logs = {t: [] for t in tables}
    for (label, dtype), per_table in by_row.items():
        for t in tables:
            if t not in per_table:
                continue
            f = per_table[t]
            print(f"{(label + ' ' + dtype)[:34]:<34} {t:<12} " + " ".join(f"{cell(f[n]):>6}" for n in names))
            if f["pick"]:
                logs[t].append(math.log(f["pick"]))
    for t in tables:
        if logs[t]:
            print(f"table {t}: picks at {math.exp(sum(logs[t]) / len(logs[t])):.3f} of each row's fastest "
                  f"variant (geometric mean of {len(logs[t])} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
