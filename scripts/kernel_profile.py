#!/usr/bin/env python3
"""Per-kernel device time from an Nsight Compute CSV (ncu --csv --metrics gpu__time_duration.sum).

Groups launches by kernel name and prints count, median and total microseconds, largest total
first, so a forward's time can be split into its kernels:
  ncu --csv --metrics gpu__time_duration.sum tlbench run ... > prof.csv
  scripts/kernel_profile.py prof.csv
"""
import csv
import statistics
import sys
from collections import defaultdict


def main(path: str) -> int:
    times = defaultdict(list)
    with open(path, newline="") as f:
        # ncu prints its own progress lines before the CSV header.
        lines = [ln for ln in f if ln.startswith('"')]
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "ns")
        scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}.get(unit, 1e-3)
        name = row["Kernel Name"].split("(")[0][:90]
        times[name].append(value * scale)
    total = sum(sum(v) for v in times.values())
    print(f"{'kernel':90s} {'count':>6s} {'median us':>10s} {'total us':>10s} {'share':>6s}")
    for name, v in sorted(times.items(), key=lambda kv: -sum(kv[1])):
        print(f"{name:90s} {len(v):6d} {statistics.median(v):10.2f} {sum(v):10.1f} {100 * sum(v) / total:5.1f}%")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
