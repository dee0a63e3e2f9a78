#!/usr/bin/env python3
"""The GEMMs run alone beside cuBLAS: speed, clock, power and what held the clock, per table.

    scripts/gemm_alone.py KERNELS.jsonl [--commit PREFIX] [--base PREFIX]

KERNELS.jsonl holds `tlbench_kernel_bench gemm --energy` records ("gemm_sustained": per GEMM,
cuBLAS, our pick and cuBLAS again, each run alone). Per GEMM of a table (commit; every table
in the file, or the one --commit names): ours over cuBLAS (the record's ratio), the SM clock
of each (cuBLAS's the mean of its two runs), the power of each, the TFLOP/s each does a GHz
(cycles, apart from the clock) and the clock-event reasons active in at least a tenth of each
run (NVML's, where the records carry them). Then per dtype the geometric mean ratio and the
medians of the clocks and powers: whether a gap is cycles or clock, and what holds the clock.

With --base, the --commit table against the base table, GEMM by GEMM: ours/cuBLAS of the
first over that of the second, and the geometric mean per dtype and per family of the pick's
variant (ping-pong on 128 x 128 tiles, in pairs, on 128 x 192 tiles, cooperative on 256 x 128
and 128 x 256 tiles: as scripts/gemm_families.py names them), for an A/B of two builds
measured in one call. Where a table holds a GEMM twice, its last record counts.

Exit 0 with at least one row printed; 1 when no record matched; 2 on bad input (one line naming
the file and the line).
"""
import argparse
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gemm_families import family_of  # noqa: E402
from json_lines import read_objects  # noqa: E402

RUNS = ("ours", "cublas_before", "cublas_after")
# A reason shown beside a run: active in at least this share of its reads.
SHOWN_SHARE = 0.1


def is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def load(path):
    """The "gemm_sustained" records of `path`, checked; ValueError or OSError on bad input."""
    rows = []
    for n, r in read_objects(path):
        if r.get("kernel") != "gemm_sustained":
            continue
        for key in ("label", "dtype", "commit", "variant", "ratio", *RUNS):
            if key not in r:
                raise ValueError(f"{path}:{n}: sustained GEMM record without \"{key}\"")
        for key in ("label", "dtype", "commit", "variant"):
            if not isinstance(r[key], str):
                raise ValueError(f"{path}:{n}: \"{key}\" is not a string")
        for run in RUNS:
            x = r[run]
            if not isinstance(x, dict) or not is_number(x.get("tflops")):
                raise ValueError(f"{path}:{n}: \"{run}\" without a number \"tflops\"")
            for key in ("sm_mhz", "watts"):
                if x.get(key) is not None and not is_number(x[key]):
                    raise ValueError(f"{path}:{n}: \"{run}\".\"{key}\" is not a number or null")
            events = x.get("clock_events")
            if events is not None and (not isinstance(events, dict) or
                                       not all(is_number(v) for v in events.values())):
                raise ValueError(f"{path}:{n}: \"{run}\".\"clock_events\" is not an object of shares")
        if not is_number(r["ratio"]) or r["ratio"] <= 0:
            raise ValueError(f"{path}:{n}: \"ratio\" is not a positive number")
        rows.append(r)
    return rows


def mean(*xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def fmt(x, spec, width):
    return f"{'-':>{width}}" if x is None else f"{x:{width}{spec}}"


def events_text(run):
    """The reasons active in at least SHOWN_SHARE of a run's reads ("-" where the record has
    none; "none" where no reason was active)."""
    events = run.get("clock_events")
    if events is None:
        return "-"
    shown = [f"{k} {v:.0%}" for k, v in events.items() if v >= SHOWN_SHARE]
    return ", ".join(shown) if shown else "none"


def summary(r):
    """The per-GEMM figures of one record: clocks, powers and TFLOP/s a GHz of ours and cuBLAS."""
    o, b, a = (r[x] for x in RUNS)
    mhz = (o.get("sm_mhz"), mean(b.get("sm_mhz"), a.get("sm_mhz")))
    per_ghz = tuple(None if not m else t / m * 1000 for t, m in
                    zip((o["tflops"], mean(b["tflops"], a["tflops"])), mhz))
    return {"mhz": mhz, "watts": (o.get("watts"), mean(b.get("watts"), a.get("watts"))), "per_ghz": per_ghz}


def print_table(t, rows):
    print(f"table {t}")
    print(f"{'GEMM':<38} {'ratio':>6} {'MHz ours':>8} {'cuBLAS':>6} {'W ours':>6} {'cuBLAS':>6} "
          f"{'TF/GHz':>6} {'cuBLAS':>6}  clock events: ours | cuBLAS before, after")
    by_dtype = {}
    for r in rows:
        s = summary(r)
        print(f"{(r['label'] + ' ' + r['dtype'])[:38]:<38} {r['ratio']:6.3f} {fmt(s['mhz'][0], '.0f', 8)} "
              f"{fmt(s['mhz'][1], '.0f', 6)} {fmt(s['watts'][0], '.0f', 6)} {fmt(s['watts'][1], '.0f', 6)} "
              f"{fmt(s['per_ghz'][0], '.0f', 6)} {fmt(s['per_ghz'][1], '.0f', 6)}  "
              f"{events_text(r['ours'])} | {events_text(r['cublas_before'])}, {events_text(r['cublas_after'])}")
        by_dtype.setdefault(r["dtype"], []).append((r, s))
    for dtype, rs in by_dtype.items():
        mhz_o, mhz_c = (median(s["mhz"][i] for _, s in rs) for i in (0, 1))
        w_o, w_c = (median(s["watts"][i] for _, s in rs) for i in (0, 1))
        print(f"{dtype}: ours/cuBLAS {geomean([r['ratio'] for r, _ in rs]):.3f} (geometric mean of {len(rs)}); "
              f"median clock {fmt(mhz_o, '.0f', 0)} against {fmt(mhz_c, '.0f', 0)} MHz, "
              f"median power {fmt(w_o, '.0f', 0)} against {fmt(w_c, '.0f', 0)} W")


def print_ab(t, base, rows, base_rows):
    print(f"table {t} over table {base} (ours/cuBLAS of each)")
    print(f"{'GEMM':<38} {'new':>6} {'base':>6} {'ratio':>6}  family (variant)")
    by_dtype, by_family = {}, {}
    for key, r in rows.items():
        if key not in base_rows:
            continue
        b = base_rows[key]
        x = r["ratio"] / b["ratio"]
        fam = family_of(r["variant"])
        same = "" if b["variant"] == r["variant"] else f", base {b['variant']}"
        print(f"{(key[0] + ' ' + key[1])[:38]:<38} {r['ratio']:6.3f} {b['ratio']:6.3f} {x:6.3f}  "
              f"{fam} ({r['variant']}{same})")
        by_dtype.setdefault(key[1], []).append(x)
        by_family.setdefault((key[1], fam), []).append(x)
    if not by_dtype:
        return False
    for (dtype, fam), xs in by_family.items():
        print(f"{dtype} {fam}: {geomean(xs):.3f} over {len(xs)} GEMMs ({min(xs):.3f}-{max(xs):.3f})")
    for dtype, xs in by_dtype.items():
        print(f"{dtype}: {geomean(xs):.3f} over {len(xs)} GEMMs")
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernels")
    ap.add_argument("--commit", help="the table's commit (prefix); default: every table")
    ap.add_argument("--base", help="a second table's commit (prefix): the first over it, GEMM by GEMM")
    a = ap.parse_args()
    if a.base and not a.commit:
        print("gemm_alone: --base needs --commit (the table set against it)", file=sys.stderr)
        return 2
    try:
        records = load(a.kernels)
    except ValueError as e:
        print(f"gemm_alone: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"gemm_alone: {a.kernels}: cannot read ({e.strerror})", file=sys.stderr)
        return 2

    # commit as recorded (a build of a changed tree says "-dirty") -> {(label, dtype): last
    # record}, in order of first appearance
    tables = {}
    for r in records:
        tables.setdefault(r["commit"], {})[(r["label"], r["dtype"])] = r

    def table(prefix):
        """The one table `prefix` names: the commit itself, or the only one it begins."""
        if prefix in tables:
            return prefix
        hits = [t for t in tables if t.startswith(prefix)]
        return hits[0] if len(hits) == 1 else None

    if a.base:
        t, b = table(a.commit), table(a.base)
        if t is None or b is None or not print_ab(t, b, tables[t], tables[b]):
            print(f"gemm_alone: no GEMM is in both table '{a.commit}' and table '{a.base}' (each prefix must name "
                  f"one table of {a.kernels})", file=sys.stderr)
            return 1
        return 0
    chosen = [t for t in tables if not a.commit or t.startswith(a.commit)]
    if not chosen:
        print(f"gemm_alone: no sustained GEMM record{' of ' + a.commit if a.commit else ''} in {a.kernels}",
              file=sys.stderr)
        return 1
    for t in chosen:
        print_table(t, list(tables[t].values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
