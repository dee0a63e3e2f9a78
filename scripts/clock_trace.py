#!/usr/bin/env python3
"""The card's SM clock and power beside each line a benchmark prints.

    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active \
        --format=csv,noheader,nounits -lms 100 >S &
    BENCH | clock_trace.py stamp >STAMPED
    clock_trace.py annotate S STAMPED

`stamp` prefixes every line of stdin with the time it arrived. `annotate` prints each stamped
line after the median SM clock (MHz) and power (W) the samples show between it and the line
before, and the clock-limiting reasons the driver reported in any of them (the optional fourth
column, a bit mask: power cap, thermal, slowdown): a benchmark that prints one line per shape
gets the clocks its shape ran at, so a number that came from a lower or capped clock (a card at
its power or thermal limit) shows as such.
"""
import statistics
import sys
import time
from datetime import datetime


def stamp() -> None:
    for line in sys.stdin:
        sys.stdout.write(f"{time.time():.3f} {line}")
        sys.stdout.flush()


# The driver's clock event reasons that limit the clock (nvidia-smi -q names them so); idle and
# the application-clock setting are not limits a benchmark hits.
REASONS = {0x4: "sw-power-cap", 0x8: "hw-slowdown", 0x20: "sw-thermal", 0x40: "hw-thermal", 0x80: "hw-power-brake"}


def reason_names(mask: int) -> str:
    names = [name for bit, name in REASONS.items() if mask & bit]
    return ",".join(names) if names else "none"


def read_samples(path: str) -> list[tuple[float, float, float, int]]:
    samples = []
    with open(path, encoding="utf-8") as f:
        for raw in f:
            parts = [p.strip() for p in raw.split(",")]
            if len(parts) < 3:
                continue
            try:
                t = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                mask = int(parts[3], 16) if len(parts) > 3 and parts[3].startswith("0x") else 0
                samples.append((t, float(parts[1]), float(parts[2]), mask))
            except ValueError:
                continue  # a header or a torn last line
    return samples


class BadInput(Exception):
    """One line naming the file and what is wrong with it."""


def read_stamped(path: str) -> list[tuple[float, str]]:
    lines = []
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            t_text, _, line = raw.partition(" ")
            try:
                lines.append((float(t_text), line))
            except ValueError:
                raise BadInput(f"{path}:{n}: not a stamped line (expected 'SECONDS TEXT')") from None
    return lines


def annotate(samples_path: str, stamped_path: str) -> None:
    samples = sorted(read_samples(samples_path))
    i = 0  # the first sample after the line before
    for t, line in read_stamped(stamped_path):
        start = i
        while i < len(samples) and samples[i][0] <= t:
            i += 1
        inside = samples[start:i]
        if inside:
            mhz = statistics.median(s[1] for s in inside)
            watts = statistics.median(s[2] for s in inside)
            mask = 0
            for s in inside:
                mask |= s[3]
            sys.stdout.write(f"[{mhz:5.0f} MHz {watts:4.0f} W {reason_names(mask)}] {line}")
        else:
            sys.stdout.write(f"[    - MHz    - W -] {line}")


USAGE = "usage: clock_trace.py stamp | clock_trace.py annotate SAMPLES.csv STAMPED"


def main() -> int:
    if len(sys.argv) == 2 and sys.argv[1] == "stamp":
        stamp()
        return 0
    if len(sys.argv) == 4 and sys.argv[1] == "annotate":
        try:
            annotate(sys.argv[2], sys.argv[3])
        except BadInput as e:
            print(f"clock_trace.py: {e}", file=sys.stderr)
            return 2
        except OSError as e:
            print(f"clock_trace.py: {e.filename}: {e.strerror}", file=sys.stderr)
            return 2
        return 0
    print(f"clock_trace.py: {USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
