#!/usr/bin/env python3
"""`tlbench explain`'s stage lines beside tlbench_kernel_bench's stages, same GPU, same call.

    scripts/explain_vs_bench.py STAGES.jsonl EXPLAIN.json [EXPLAIN.json ...]

STAGES.jsonl is `tlbench_kernel_bench stages FILE`: per case, dtype and auto configuration,
each stage's kernels of every layer launched alone, each timing after its producer stage's
kernels (untimed: the stage's input is then in L2, as inside the forward). Each EXPLAIN.json is
`tlbench explain --configs auto --json-out`: the same stages timed inside the forward, by
events between them (less the events' own cost) and by the marginal method. For the attention
and GEMM stages (attn, qkv, out_proj, ffn_up, ffn_down) of the configurations the kernel
bench timed (auto), the table sets both beside the kernels alone, as ratios. The two programs
run a minute apart, and on a card under its power cap the clock moves by 10 % and more in a
minute, so the verdict compares shares of the forward: explain's events time over explain's
forward against the kernels alone over the forward the bench timed in turns with them
(`forward_in_turns_ms`); a stage agrees where its share ratio is within 5 % of 1. Rows
without that field (files from before it) are compared by absolute time, and say so. Stages
under 0.05 ms a layer are listed but not judged: there the events' own cost (1-3 us each,
taken off explain's times) and each kernel's launch on the GPU (a replayed graph's are
cheaper than a stream's) are a large part of the time. The kernel bench times the stage
alone behind a launch hold (`stage_launch_hold`), so the host's launches are in neither
side. Explain's other configurations (the reference) are left out.

Exit 0 when every judged stage agrees and at least one was judged; 1 when one does not, when
nothing could be judged, or when an auto configuration of an explain file has no kernel-bench
rows; 2 on bad input (one line naming the file).
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from json_lines import read_objects  # noqa: E402

JUDGED = ("qkv", "attn", "out_proj", "ffn_up", "ffn_down")
TOLERANCE = 0.05
MIN_LAYER_MS = 0.05


def dtype_key(dtype, math):
    """The kernel bench's dtype name: fp32 with its math ("fp32-tf32")."""
    return f"fp32-{math}" if dtype == "fp32" else dtype


def float_or_none(value):
    """A JSON number as a float; None where the field is absent or null."""
    return None if value is None else float(value)


def read_stages(path):
    stages = {}
    for n, r in read_objects(path):
        if r.get("kernel") != "stage":
            continue
        for key in ("case_id", "dtype", "config", "stage", "ms", "layers"):
            if r.get(key) is None:
                raise ValueError(f"{path}:{n}: a stage row without '{key}'")
        try:
            key = (int(r["case_id"]), str(r["dtype"]), str(r["config"]), str(r["stage"]))
            stages[key] = (float(r["ms"]), int(r["layers"]), float_or_none(r.get("forward_in_turns_ms")))
        except (TypeError, ValueError) as e:
            raise ValueError(f"{path}:{n}: a stage row with a field of the wrong type ({e})") from e
    return stages


def read_explain(path):
    with open(path) as f:
        try:
            e = json.load(f)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: not JSON ({err.msg})") from err
    try:
        case_id, dtype = int(e["case_id"]), dtype_key(e["dtype"], e.get("math", ""))
        configs = e["configs"]
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{path}: not a tlbench explain document (no {err})") from err
    lines = []
    try:
        for c in configs:
            # The kernel bench times the auto configuration; not measured: nothing to compare.
            if "error" in c or not str(c["config"]).startswith("auto="):
                continue
            forward = float_or_none(c.get("forward_ms"))
            for s in c["stages"]:
                lines.append((case_id, dtype, str(c["config"]), str(s["stage"]), float(s["events_ms"]),
                              float(s["marginal_ms"]), forward))
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{path}: a configuration or stage without a usable field ({err})") from err
    return lines


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stages", help="tlbench_kernel_bench stages FILE")
    ap.add_argument("explain", nargs="+", help="tlbench explain --json-out files")

    def usage_error(message):  # argparse's own complaints, as one line and exit 2 like ours
        print(f"explain_vs_bench.py: {message}", file=sys.stderr)
        sys.exit(2)

    ap.error = usage_error
    args = ap.parse_args(argv)
    try:
        stages = read_stages(args.stages)
        lines = [line for p in args.explain for line in read_explain(p)]
    except (OSError, ValueError) as e:
        print(f"explain_vs_bench.py: {e}", file=sys.stderr)
        return 2
    print(f"{'case':>4} {'dtype':<10} {'config':<12} {'stage':<9} {'alone ms':>9} {'events':>8} {'marginal':>8} "
          f"{'share':>8}  verdict")
    judged = agree = by_time = 0
    unmatched = []
    for case_id, dtype, config, stage, events_ms, marginal_ms, forward in lines:
        if stage not in JUDGED:
            continue
        alone = stages.get((case_id, dtype, config, stage))
        if alone is None:
            unmatched.append(f"case {case_id} {dtype} {config} {stage}")
            continue
        ms, layers, in_turns = alone
        ev, mg = events_ms / ms if ms > 0 else float("inf"), marginal_ms / ms if ms > 0 else float("inf")
        # The events' share of explain's forward over the kernels' share of the bench's forward.
        share = ev * in_turns / forward if in_turns and forward else None
        if ms / max(layers, 1) < MIN_LAYER_MS:
            verdict = "not judged (launch-bound)"
        else:
            judged += 1
            if share is None:
                by_time += 1
            r = ev if share is None else share
            ok = abs(r - 1) <= TOLERANCE
            agree += ok
            verdict = ("agrees" if ok else f"off by {100 * (r - 1):+.1f} %") + (" (by time)" if share is None else "")
        shown = "-" if share is None else f"{share:.3f}"
        print(f"{case_id:>4} {dtype:<10} {config:<12} {stage:<9} {ms:>9.4f} {ev:>8.3f} {mg:>8.3f} {shown:>8}  {verdict}")
    print(f"\n{agree} of {judged} judged attention and GEMM stages within {100 * TOLERANCE:.0f} % of their kernels "
          f"alone (share column: explain's events over its forward against the kernels alone over the forward "
          f"timed in turns with them; events and marginal: explain / kernels alone by time)")
    if by_time:
        print(f"{by_time} judged by absolute time: their kernel-bench rows have no forward_in_turns_ms, or their "
              f"explain configuration no forward_ms")
    if unmatched:
        print(f"{len(unmatched)} stage(s) without a kernel-bench row: " + "; ".join(unmatched[:5]) +
              ("; ..." if len(unmatched) > 5 else ""))
    if judged == 0:
        print("nothing judged: no attention or GEMM stage of an auto configuration over "
              f"{MIN_LAYER_MS} ms a layer with a kernel-bench row")
    return 0 if judged > 0 and agree == judged and not unmatched else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
