#!/usr/bin/env python3
"""Times PyTorch's scaled_dot_product_attention on the shapes `tlbench_kernel_bench attn FILE`
measured, per backend (cuDNN, FlashAttention-2; for fp32 IEEE rows the memory-efficient
kernel, the one PyTorch runs in fp32, with TF32 off), and writes the kernels.jsonl records that
set ours beside the peer's: {"kernel": "attention", "dtype", "batch", "heads", "seq",
"head_dim", "causal", "ours_tflops", "variant", "peer": "cudnn" | "efficient", "peer_tflops",
"ratio", "commit", ...}.

Run it on the same GPU right after the benchmark (both numbers then come from one machine and
one session). Same layout ([batch, heads, seq, head_dim]), same random data scale, same FLOP
count (4 b h s^2 d, halved under the causal mask); medians of CUDA-event-timed calls after
warm-up (the first shape's after a second of sustained calls, as the benchmark does).

With --rerun BIN the script runs `BIN attn FILE` once more after the peer is timed and sets
the mean of ours before and after (per shape, in milliseconds) against the peer, so that a
card's drift over the run (clocks, temperature) lands on both sides alike; the record keeps
both of ours in "ours_runs_tflops".

    python3 scripts/attention_peer.py OURS.jsonl OUT.jsonl [--append] [--rerun BIN]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from json_lines import read_objects


# Per dtype of the benchmark: the torch dtype and the SDPA backends timed, the first one the
# peer that ours is set against.
PEERS = {"fp16": ("float16", ("cudnn", "flash2")), "bf16": ("bfloat16", ("cudnn", "flash2")),
         "fp32-ieee": ("float32", ("efficient",))}

REQUIRED = {"dtype": str, "batch": int, "heads": int, "seq": int, "head_dim": int, "causal": bool,
            "ours_tflops": (int, float), "variant": str, "commit": str}


def fail(msg: str) -> int:
    print(f"attention_peer.py: {msg}", file=sys.stderr)
    return 2


def read_ours(path: str):
    """The benchmark's rows, or (None, one-line reason)."""
    if not os.path.isfile(path):
        return None, f"{path}: not a regular file"
    try:
        objects = read_objects(path)
    except ValueError as e:
        return None, str(e)
    except OSError as e:
        return None, f"{path}: {e.strerror}"
    rows = []
    for n, r in objects:
        for key, kind in REQUIRED.items():
            if not isinstance(r.get(key), kind) or (kind is int and isinstance(r.get(key), bool)):
                return None, f"{path}:{n}: \"{key}\" missing or not {getattr(kind, '__name__', 'a number')}"
        if r["dtype"] not in PEERS:
            return None, f"{path}:{n}: dtype {r['dtype']!r} is not one of {', '.join(PEERS)}"
        if min(r["batch"], r["heads"], r["seq"], r["head_dim"]) < 1 or not r["ours_tflops"] > 0:
            return None, f"{path}:{n}: sizes and ours_tflops must be positive"
        rows.append(r)
    return rows, None


def rerun_ours(bench: str, out_dir: str, rows):
    """Ours again on the same shapes, in the rows' order: ([TFLOP/s], None) or (None, reason)."""
    fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=".attention_rerun.", suffix=".jsonl")
    os.close(fd)
    try:
        done = subprocess.run([bench, "attn", tmp], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            return None, f"--rerun {bench}: exit {done.returncode}: {(done.stderr.strip().splitlines() or [''])[-1]}"
        again, why = read_ours(tmp)
    finally:
        os.unlink(tmp)
    if again is None:
        return None, f"--rerun {bench}: {why}"
    key = lambda r: (r["dtype"], r["batch"], r["heads"], r["seq"], r["head_dim"], r["causal"])
    by_shape = {key(r): r for r in again}
    missing = [key(r) for r in rows if key(r) not in by_shape]
    if missing:
        return None, f"--rerun {bench}: shape {missing[0]} not measured again"
    return [by_shape[key(r)]["ours_tflops"] for r in rows], None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ours", help="JSON lines written by `tlbench_kernel_bench attn FILE`")
    ap.add_argument("out", help="kernels.jsonl to write")
    ap.add_argument("--append", action="store_true", help="append to OUT instead of replacing it")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rerun", metavar="BIN", help="tlbench_kernel_bench to run again after the peer")
    args = ap.parse_args()
    # Bad input: one line, exit 2, nothing written.
    if args.reps < 1:
        return fail(f"--reps {args.reps}: must be at least 1")
    if args.rerun and not (os.path.isfile(args.rerun) and os.access(args.rerun, os.X_OK)):
        return fail(f"--rerun {args.rerun}: not an executable file")
    rows, why = read_ours(args.ours)
    if rows is None:
        return fail(why)
    if os.path.lexists(args.out) and (os.path.islink(args.out) or not os.path.isfile(args.out)):
        return fail(f"{args.out}: exists and is not a regular file; not replaced")
    out_dir = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(out_dir):
        return fail(f"{args.out}: the folder {out_dir} does not exist")
    try:
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        return fail(f"PyTorch is needed for the peer timings ({e})")
    if not torch.cuda.is_available():
        return fail("no CUDA device")
    backends = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash2": SDPBackend.FLASH_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION}
    # fp32 as IEEE: no TF32 anywhere in the peer's fp32 products.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    env = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cudnn": str(torch.backends.cudnn.version()),
    }

    def time_ms(fn, warm_s: float = 0.0) -> float:
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        start = time.monotonic()
        while time.monotonic() - start < warm_s:
            for _ in range(4):
                fn()
            torch.cuda.synchronize()
        times = []
        for _ in range(args.reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        times.sort()
        return times[len(times) // 2]

    peers = []
    for n, r in enumerate(rows):
        shape = (r["batch"], r["heads"], r["seq"], r["head_dim"])
        torch_dtype, names = PEERS[r["dtype"]]
        dt = getattr(torch, torch_dtype)
        q, k, v = (torch.empty(shape, dtype=dt, device="cuda").uniform_(-1, 1) for _ in range(3))
        flops = 4.0 * r["batch"] * r["heads"] * r["seq"] ** 2 * r["head_dim"] * (0.5 if r["causal"] else 1.0)
        peer = {}
        for name in names:
            try:
                with sdpa_kernel(backends[name]):
                    ms = time_ms(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=r["causal"]),
                                 1.0 if n == 0 and name == names[0] else 0.0)
                peer[name] = round(flops / ms / 1e9, 1)
            except RuntimeError as e:  # the backend does not take this shape
                peer[name] = None
                print(f"attention_peer.py: {name} on {shape}: {str(e).splitlines()[0]}", file=sys.stderr)
        del q, k, v
        torch.cuda.empty_cache()
        peers.append((names, peer))
    after = None
    if args.rerun:
        after, why = rerun_ours(args.rerun, out_dir, rows)
        if after is None:
            print(f"attention_peer.py: {why}", file=sys.stderr)
            return 1
    records = []
    for n, (r, (names, peer)) in enumerate(zip(rows, peers)):
        runs = [r["ours_tflops"]] + ([after[n]] if after else [])
        # The mean time of the runs, as a rate.
        ours = round(len(runs) / sum(1.0 / t for t in runs), 1)
        main_peer = peer[names[0]]
        rec = {
            "kernel": "attention", "dtype": r["dtype"], "batch": r["batch"], "heads": r["heads"], "seq": r["seq"],
            "head_dim": r["head_dim"], "causal": r["causal"], "ours_tflops": ours, "variant": r["variant"],
            "peer": names[0], "peer_tflops": main_peer, "ratio": round(ours / main_peer, 3) if main_peer else None,
            **{f"{name}_tflops": peer[name] for name in names[1:]}, "commit": r["commit"], **env,
        }
        if after:
            rec["ours_runs_tflops"] = runs
        records.append(rec)
        ratio = f"{rec['ratio']:.3f}" if rec["ratio"] else "-"
        others = "".join(f"  {name} {peer[name] or 0:6.1f}" for name in names[1:])
        print(f"attn {r['dtype']} b={r['batch']} h={r['heads']} s={r['seq']} d={r['head_dim']} "
              f"{'causal' if r['causal'] else 'none':<6} ours {ours:6.1f}  {names[0]} {main_peer or 0:6.1f}{others}  "
              f"ours/{names[0]} {ratio}  {r['variant']}")
    # Written once every shape is measured: appended, or in place of OUT through a temporary
    # file beside it.
    text = "".join(json.dumps(rec) + "\n" for rec in records)
    if args.append:
        with open(args.out, "a") as f:
            f.write(text)
    else:
        fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=".attention_peer.")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
            os.replace(tmp, args.out)
        except BaseException:
            os.unlink(tmp)
            raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
