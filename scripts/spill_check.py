#!/usr/bin/env python3
"""Checks a build's register spills against the committed per-kernel budget.

Configured with -DTLBENCH_WARN_SPILLS=ON, ptxas names every kernel that spills registers to
local memory: "Registers are spilled to local memory in function 'K', S bytes spill stores, L
bytes spill loads". A spill that lands in a kernel's main loop costs more than most changes
gain, and nothing else says it happened. This fails when a kernel of the log spills more bytes
(stores + loads; the most over the targets it was compiled for) than configs/spill-budget.json
allows it, or spills without an entry there. Kernels are named as c++filt writes them, without
their parameter list and with anonymous namespaces dropped, so a new parameter or another
checkout path keeps their entry. Only what the build compiled is in its log: an incremental
build checks the kernels it rebuilt.

  scripts/spill_check.py BUILD_LOG [--budget FILE] [--write]

--write makes the log's spills the budget (after a change whose spills were read and accepted;
run it on the log of a full build).
"""
import argparse
import json
import os
import re
import subprocess
import sys

WARNING = re.compile(r"Registers are spilled to local memory in function '([^']+)', "
                     r"(\d+) bytes spill stores, (\d+) bytes spill loads")


def kernel_key(demangled):
    """`void ns::kernel<args>(params)` -> `ns::kernel<args>`, anonymous namespaces dropped."""
    name = demangled
    if name.endswith(")"):  # cut the parameter list: the last top-level parenthesis
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[i], 0)
            if depth == 0:
                name = name[:i]
                break
    name = name.replace("(anonymous namespace)::", "")
    return name[len("void "):] if name.startswith("void ") else name


def demangle(names):
    if not names:
        return []
    out = subprocess.run(["c++filt"], input="\n".join(names) + "\n", capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def spills_of(log_path):
    """kernel key -> the most bytes (stores + loads) any of its compilations spilled."""
    found = []
    with open(log_path, errors="replace") as f:
        for line in f:
            m = WARNING.search(line)
            if m:
                found.append((m.group(1), int(m.group(2)) + int(m.group(3))))
    spills = {}
    for (_, nbytes), name in zip(found, demangle([mangled for mangled, _ in found])):
        key = kernel_key(name)
        spills[key] = max(spills.get(key, 0), nbytes)
    return spills


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("--budget", default="configs/spill-budget.json")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    try:
        spills = spills_of(args.log)
    except OSError as e:
        print(f"spill_check: {args.log}: {e.strerror}", file=sys.stderr)
        return 2
    if args.write:
        if os.path.islink(args.budget) or (os.path.exists(args.budget) and not os.path.isfile(args.budget)):
            print(f"spill_check: {args.budget}: not a regular file; not replaced", file=sys.stderr)
            return 2
        with open(args.budget, "w") as f:
            json.dump(dict(sorted(spills.items())), f, indent=1)
            f.write("\n")
        print(f"spill_check: {args.budget}: {len(spills)} kernels' spills recorded")
        return 0
    try:
        with open(args.budget) as f:
            budget = json.load(f)
    except (OSError, ValueError) as e:
        print(f"spill_check: {args.budget}: {e}", file=sys.stderr)
        return 2
    over = [(k, b, budget.get(k)) for k, b in sorted(spills.items()) if b > budget.get(k, 0)]
    for key, nbytes, allowed in over:
        limit = f"its budget is {allowed}" if allowed is not None else "it has no budget"
        print(f"spill_check: {key} spills {nbytes} bytes; {limit} ({args.budget})", file=sys.stderr)
    if over:
        print(f"spill_check: {len(over)} kernel(s) spill more than allowed: read their ptxas report "
              f"(-Xptxas -v); if the spill is accepted, rerun with --write on a full build's log", file=sys.stderr)
        return 1
    print(f"spill_check: {len(spills)} spilling kernel(s) in the log, all within {args.budget}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
