#!/usr/bin/env python3
"""The card's SM clock and power beside each line a benchmark prints.

    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader,nounits -lms 100 >S &
    BENCH | clock_trace.py stamp >STAMPED
    clock_trace.py annotate S STAMPED

`stamp` prefixes every line of stdin with the time it arrived. `annotate` prints each stamped
line after the median SM clock (MHz) and power (W) the samples show between it and the line
before: a benchmark that prints one line per shape gets the clocks its shape ran at, so a
number that came from a lower clock (a card at its power or thermal limit) shows as such.
"""
import statistics
import sys
import time
from datetime import datetime


def stamp() -> None:
    for line in sys.stdin:
        sys.stdout.write(f"{time.time():.3f} {line}")
        sys.stdout.flush()


def read_samples(path: str) -> list[tuple[float, float, float]]:
    samples = []
    with open(path, encoding="utf-8") as f:
        for raw in f:
            parts = [p.strip() for p in raw.split(",")]
            if len(parts) < 3:
                continue
            try:
                t = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                samples.append((t, float(parts[1]), float(parts[2])))
            except ValueError:
                continue  # a header or a torn last line
    return samples


def annotate(samples_path: str, stamped_path: str) -> None:
    samples = read_samples(samples_path)
    prev = None
    with open(stamped_path, encoding="utf-8") as f:
        for raw in f:
            t_text, _, line = raw.partition(" ")
            t = float(t_text)
            inside = [s for s in samples if (prev is None or s[0] > prev) and s[0] <= t]
            if inside:
                mhz = statistics.median(s[1] for s in inside)
                watts = statistics.median(s[2] for s in inside)
                sys.stdout.write(f"[{mhz:5.0f} MHz {watts:4.0f} W] {line}")
            else:
                sys.stdout.write(f"[    - MHz    - W] {line}")
            prev = t


def main() -> int:
    if len(sys.argv) == 2 and sys.argv[1] == "stamp":
        stamp()
        return 0
    if len(sys.argv) == 4 and sys.argv[1] == "annotate":
        annotate(sys.argv[2], sys.argv[3])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
