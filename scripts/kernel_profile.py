#!/usr/bin/env python3
"""Per-kernel device time from an Nsight Compute CSV (ncu --csv --metrics gpu__time_duration.sum).

Groups launches by kernel name and prints count, median and total microseconds, largest total
first, so a forward's time can be split into its kernels:
  ncu --csv --metrics gpu__time_duration.sum tlbench run ... > prof.csv
  scripts/kernel_profile.py prof.csv
With --sequence N it then lists the last N launches in issue order (grid, block, microseconds),
which is one forward when N is the forward's kernel count.
"""
import argparse
import csv
import statistics
from collections import defaultdict

SCALE_TO_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}


def read_launches(path: str) -> list:
    with open(path, newline="") as f:
        # ncu prints its own progress lines before the CSV header.
        lines = [ln for ln in f if ln.startswith('"')]
    launches = []
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        us = value * SCALE_TO_US.get(row.get("Metric Unit", "ns"), 1e-3)
        launches.append({"name": row["Kernel Name"].split("(")[0][:90], "us": us,
                         "grid": row.get("Grid Size", ""), "block": row.get("Block Size", "")})
    return launches


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--sequence", type=int, default=0, help="list the last N launches in order")
    args = ap.parse_args()
    launches = read_launches(args.csv)
    times = defaultdict(list)
    for k in launches:
        times[k["name"]].append(k["us"])
    total = sum(k["us"] for k in launches)
    print(f"{'kernel':90s} {'count':>6s} {'median us':>10s} {'total us':>10s} {'share':>6s}")
    for name, v in sorted(times.items(), key=lambda kv: -sum(kv[1])):
        print(f"{name:90s} {len(v):6d} {statistics.median(v):10.2f} {sum(v):10.1f} {100 * sum(v) / total:5.1f}%")
    if args.sequence > 0:
        tail = launches[-args.sequence:]
        print(f"\nlast {len(tail)} launches, in order ({sum(k['us'] for k in tail):.2f} us in all)")
        for k in tail:
            print(f"{k['us']:8.2f}  {k['grid']:>14s} {k['block']:>14s}  {k['name']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
