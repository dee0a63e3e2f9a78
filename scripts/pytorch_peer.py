#!/usr/bin/env python3
"""Times PyTorch's nn.TransformerEncoder on the cases of a cases file and writes
RESULTS_DIR/peer_pytorch.jsonl, the PyTorch side of tlbench's comparison.

Per case the model is what tlbench computes: TransformerEncoder(TransformerEncoderLayer(d_model,
nhead, dim_feedforward, dropout=0, activation, layer_norm_eps, batch_first=True, norm_first=True),
layers) in eval mode under torch.no_grad(), in the dtype, with the case's mask; weights are
PyTorch's own random init (only time is measured). Per (case, dtype, math) it times every mode
PyTorch offers for inference:
  eager           the module call with the native fast path switched off (SDPA inside)
  fastpath        the module call with the fast path on, where PyTorch takes it (checked by
                  watching torch._transformer_encoder_layer_fwd; otherwise not_applicable). Its
                  FFN runs torch._addmm_activation, whose GELU is the tanh approximation even
                  where the model asks for the exact one: probed once per dtype, the fast-path
                  rows of a `gelu` case say which in `ffn_gelu` ("tanh" or "exact")
  graph           a torch.cuda.CUDAGraph capture of the eager call, replayed
  fastpath_graph  the same for the fast path, where it is taken
  compile         torch.compile(model, mode=--compile-mode) of the eager module, only with --compile
fp32 runs in two maths: ieee (TF32 off in matmuls and cuDNN) and tf32 (TF32 allowed there);
fp16 and bf16 run their native math. Off is not quite "no tensor cores": on sm_80 and later the
memory-efficient SDPA kernel that PyTorch picks for fp32 attention multiplies on tensor cores
in three TF32 products a product (CUTLASS's OpMultiplyAddFastF32, about fp32's accuracy), with
or without TF32 allowed; tlbench's ieee attention runs on the FMA pipes. Each mode is warmed
up (>= 3 calls and >= 25 ms, the card >= 1 s before the first), then settled: its calls run on
for --settle-s seconds in all (default 2), so that it is timed at the clock the card holds
under its power cap, as tlbench's points are in a sweep that keeps the card busy (on an H100,
case 10 took 11-12 % longer settled 2 s than timed right after 25 ms of warm-up: 1365-1620 MHz
against about 1965). A mode whose warm-up calls already take more than 1.1x the best settled
time of its group (the usual winners are measured first: MEASURE_ORDER) is unlikely to be
the best and is timed unsettled (its row says `"settled": false`), unless its timed calls
then come within that: it is settled and timed again. Each mode is timed call
by call with CUDA events: the median and minimum in ms over --reps calls (default: as many as
fit in 0.2 s, 5 to 200). Peak memory is torch.cuda.max_memory_allocated() over the mode,
weights, input and mask included.

Run it on the same GPU right after the sweep (scripts/official-run.sh does): both sides then
come from one machine and one session. scripts/results_table.py sets the best mode beside
tlbench's `auto` row, TF32 against TF32 and IEEE against IEEE.

    pytorch_peer.py CASES.json --out RESULTS_DIR [--cases 1-5,9] [--dtypes fp16,bf16,fp32]
                    [--math ieee,tf32] [--compile] [--compile-mode MODE] [--reps N]
                    [--settle-s SECONDS] [--device cuda] [--kernels]

--device cpu exists for testing: perf_counter timing, no graph modes, no memory peak.
Exit: 0 ok, 1 some mode failed with an error other than running out of memory (its row says
which; the file is still written), 2 bad input (one line, nothing written), 3 PyTorch or the
device missing, 130 interrupted (nothing written).
"""
import argparse
import gc
import json
import math
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_pytorch import DTYPES, build_masks, build_model  # noqa: E402 - imports no torch

PROG = "pytorch_peer.py"
OUT_NAME = "peer_pytorch.jsonl"
DTYPE_ORDER = ("fp16", "bf16", "fp32")
FP32_MATHS = ("ieee", "tf32")
MODES = ("eager", "fastpath", "graph", "fastpath_graph", "compile")
# The order they are measured in: the modes that are usually fastest first, so that a slower
# one's warm-up shows it losing and it is timed without settling (the fast path before its
# graph, which needs to know whether PyTorch takes it). The file keeps MODES's order.
MEASURE_ORDER = ("graph", "fastpath", "fastpath_graph", "eager", "compile")

MAX_FILE_BYTES = 16 << 20  # as tlbench bounds a config
MAX_DIM = 2**31 - 1
MAX_LAYERS = 4096
CASE_KEYS = ("id", "name", "batch", "seq", "d_model", "heads", "d_ff", "layers", "mask",
             "valid_lens", "activation", "eps", "policy", "dtypes", "seed")
REQUIRED_KEYS = ("id", "name", "batch", "seq", "d_model", "heads", "d_ff", "layers", "mask")

WARM_MIN_CALLS = 3
WARM_MIN_S = 0.025      # tlbench's warm-up rule
FIRST_WARM_S = 1.0      # the card's clocks ramp on the first sustained work
SETTLE_S = 2.0          # a mode's calls in all before it is timed: the clock settles under the power cap
SETTLE_SKIP = 1.1       # warm calls this much over the group's best settled time: not settled
BUDGET_S = 0.2          # timed calls per mode when --reps is not given
MIN_REPS, MAX_REPS = 5, 200


class UsageError(Exception):
    pass


# ---- input, all checked before PyTorch is imported -------------------------------------------

def describe(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return f"boolean {'true' if v else 'false'}"
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, list):
        return "an array"
    if isinstance(v, str):
        return f"string {json.dumps(v)}"
    return f"{'integer' if isinstance(v, int) else 'number'} {v}"


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def check_case(c, where):
    """The case with defaults filled in, or UsageError naming `where` (file: json path)."""
    def bad(key, problem):
        path = f"{where}.{key}" if key else where
        raise UsageError(f"{path}: {problem}")

    if not isinstance(c, dict):
        bad(None, f"expected a case object, got {describe(c)}")
    for k in c:
        if k not in CASE_KEYS:
            bad(k, f"unknown key (expected one of {', '.join(CASE_KEYS)})")
    for k in REQUIRED_KEYS:
        if k not in c:
            bad(None, f"missing required field {json.dumps(k)}")
    for k in ("id", "batch", "seq", "d_model", "heads", "d_ff", "layers"):
        v = c[k]
        hi = MAX_LAYERS if k == "layers" else MAX_DIM
        if not is_int(v) or not 1 <= v <= hi:
            bad(k, f"expected a positive integer up to {hi}, got {describe(v)}")
    if not isinstance(c["name"], str) or not c["name"]:
        bad("name", f"expected a non-empty name string, got {describe(c['name'])}")
    if c["d_model"] % c["heads"]:
        bad("heads", f"{c['heads']} does not divide d_model {c['d_model']}")
    if c["mask"] not in ("none", "causal", "padding"):
        bad("mask", f"unknown mask {json.dumps(c['mask'])} (expected none, causal or padding)")
    lens = c.get("valid_lens")
    if lens is not None:
        if c["mask"] != "padding":
            bad("valid_lens", f"only allowed with mask \"padding\" (this case's mask is {json.dumps(c['mask'])})")
        if not isinstance(lens, list) or len(lens) != c["batch"]:
            bad("valid_lens", f"expected {c['batch']} valid lengths (one per batch element), got {describe(lens)}"
                + (f" of {len(lens)}" if isinstance(lens, list) else ""))
        for i, n in enumerate(lens):
            if not is_int(n) or not 1 <= n <= c["seq"]:
                bad(f"valid_lens[{i}]", f"{describe(n)} is outside 1..{c['seq']} (seq)")
    elif c["mask"] == "padding":
        bad(None, "mask \"padding\" needs \"valid_lens\" (one valid length per batch element)")
    act = c.get("activation", "gelu")
    if act not in ("gelu", "gelu_tanh", "relu"):
        bad("activation", f"unknown activation {json.dumps(act)} (expected gelu, gelu_tanh or relu)")
    eps = c.get("eps", 1e-5)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not (0 < eps < float("inf")):
        bad("eps", f"expected a positive number, got {describe(eps)}")
    dtypes = c.get("dtypes", list(DTYPE_ORDER))
    if not isinstance(dtypes, list) or not dtypes:
        bad("dtypes", f"expected a non-empty array of dtype names, got {describe(dtypes)}")
    for i, d in enumerate(dtypes):
        if d not in DTYPE_ORDER:
            bad(f"dtypes[{i}]", f"unknown dtype {describe(d)} (expected fp16, bf16 or fp32)")
    if "policy" in c and not isinstance(c["policy"], str):
        bad("policy", f"expected a policy string, got {describe(c['policy'])}")
    if "seed" in c and (not is_int(c["seed"]) or c["seed"] < 0):
        bad("seed", f"expected a non-negative integer, got {describe(c['seed'])}")
    return {**c, "activation": act, "eps": float(eps), "dtypes": dtypes, "valid_lens": lens or []}


def read_cases(path):
    if not os.path.isfile(path):
        raise UsageError(f"{path}: {'does not exist' if not os.path.lexists(path) else 'not a regular file'}")
    try:
        if os.path.getsize(path) > MAX_FILE_BYTES:
            raise UsageError(f"{path}: larger than {MAX_FILE_BYTES >> 20} MiB; not a cases file")
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
    except OSError as e:
        raise UsageError(f"{path}: {e.strerror}") from e
    except UnicodeDecodeError as e:
        raise UsageError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from e
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{path}: not JSON: {e.msg} at line {e.lineno} column {e.colno}") from e
    except RecursionError as e:
        raise UsageError(f"{path}: nested too deeply") from e
    if not isinstance(doc, dict) or "cases" not in doc:
        raise UsageError(f"{path}: $: expected an object {{\"cases\": [...]}}, got {describe(doc)}")
    extra = [k for k in doc if k != "cases"]
    if extra:
        raise UsageError(f"{path}: $.{extra[0]}: unknown key (expected only \"cases\")")
    if not isinstance(doc["cases"], list) or not doc["cases"]:
        raise UsageError(f"{path}: $.cases: expected a non-empty array of case objects, got {describe(doc['cases'])}")
    cases, ids, names = [], {}, {}
    for i, c in enumerate(doc["cases"]):
        where = f"{path}: $.cases[{i}]"
        case = check_case(c, where)
        if case["id"] in ids:
            raise UsageError(f"{where}.id: duplicate id {case['id']} (also at $.cases[{ids[case['id']]}])")
        if case["name"] in names:
            raise UsageError(f"{where}.name: duplicate name {json.dumps(case['name'])} (also at $.cases[{names[case['name']]}])")
        ids[case["id"]], names[case["name"]] = i, i
        cases.append(case)
    return cases


def select_cases(text, cases, path):
    """--cases as tlbench reads it: ids and ranges like 1-5,9, every one naming a case."""
    known = sorted(c["id"] for c in cases)
    chosen = set()
    for item in text.split(","):
        item = item.strip()
        if not item:
            raise UsageError(f"--cases: empty item in '{text}'; expected ids and ranges like 1-5,9")
        lo, dash, hi = item.partition("-")
        if not (lo.isdigit() and (not dash or hi.isdigit())):
            raise UsageError(f"--cases: '{item}' is not a case id or a range like 1-5")
        lo, hi = int(lo), int(hi) if dash else int(lo)
        if lo > hi:
            raise UsageError(f"--cases: '{item}' is not a valid range (expected FIRST-LAST with FIRST <= LAST)")
        hits = [i for i in known if lo <= i <= hi]
        if not hits:
            what = f"range '{item}' selects no case" if dash else f"no case with id {item}"
            raise UsageError(f"--cases: {what} in {path} (ids: {', '.join(map(str, known))})")
        chosen.update(hits)
    return [c for c in cases if c["id"] in chosen]


def parse_list(option, text, allowed, hint=""):
    items = []
    for item in text.split(","):
        item = item.strip()
        if item not in allowed:
            raise UsageError(f"{option}: unknown value '{item}' (expected {', '.join(allowed)}{hint})")
        if item not in items:
            items.append(item)
    return items


def check_inputs(argv):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cases_file", metavar="CASES.json", help="a cases file as tlbench reads it")
    ap.add_argument("--out", required=True, metavar="RESULTS_DIR", help=f"existing folder that gets {OUT_NAME}")
    ap.add_argument("--cases", help="ids and ranges like 1-5,9 (default: all)")
    ap.add_argument("--dtypes", default="fp16,bf16,fp32")
    ap.add_argument("--math", default="ieee,tf32", help="fp32 math modes (fp16 and bf16 run their native math)")
    ap.add_argument("--compile", action="store_true", help="also time torch.compile")
    ap.add_argument("--compile-mode", default="max-autotune",
                    help="torch.compile mode (default max-autotune; reduce-overhead compiles faster)")
    ap.add_argument("--reps", type=int, help="timed calls per mode (default: what fits in 0.2 s, 5 to 200)")
    ap.add_argument("--settle-s", type=float, default=SETTLE_S, metavar="SECONDS",
                    help=f"seconds of a mode's own calls before it is timed (default {SETTLE_S})")
    ap.add_argument("--device", default="cuda", help="cuda, cuda:N, or cpu (for testing)")
    ap.add_argument("--kernels", action="store_true",
                    help="also list each eager and fast-path mode's kernels with their device time per forward "
                         "(torch.profiler; the rows get a `kernels` field)")

    def error(message):  # argparse's own complaints, as one line and exit 2 like ours
        raise UsageError(message)

    ap.error = error
    args = ap.parse_args(argv)
    if args.reps is not None and args.reps < 1:
        raise UsageError(f"--reps {args.reps}: must be at least 1")
    if not (0 <= args.settle_s <= 60):
        raise UsageError(f"--settle-s {args.settle_s}: must be between 0 and 60 seconds")
    dev = args.device
    if not (dev in ("cuda", "cpu") or (dev.startswith("cuda:") and dev[5:].isdigit())):
        raise UsageError(f"--device {dev}: expected cuda, cuda:N or cpu")
    dtypes = parse_list("--dtypes", args.dtypes, DTYPE_ORDER)
    maths = parse_list("--math", args.math, FP32_MATHS, "; fp16 and bf16 always run their native math")
    cases = read_cases(args.cases_file)
    if args.cases is not None:
        cases = select_cases(args.cases, cases, args.cases_file)
    if not os.path.isdir(args.out):
        raise UsageError(f"--out {args.out}: {'not a folder' if os.path.lexists(args.out) else 'does not exist'}")
    target = os.path.join(args.out, OUT_NAME)
    if os.path.lexists(target) and (os.path.islink(target) or not os.path.isfile(target)):
        raise UsageError(f"{target}: exists and is not a regular file; not replaced")
    groups = []  # (case, dtype, math) in cases-file order, then fp16, bf16, fp32
    for c in cases:
        for d in DTYPE_ORDER:
            if d in dtypes and d in c["dtypes"]:
                groups.extend((c, d, m) for m in (maths if d == "fp32" else ["native"]))
    if not groups:
        raise UsageError(f"--dtypes {args.dtypes}: the selected cases run none of these dtypes")
    return args, groups, target


# ---- measuring -------------------------------------------------------------------------------

class Peer:
    """PyTorch on one device: the model of a case, its modes, and their timings."""

    def __init__(self, torch, device, args):
        self.torch = torch
        self.device = device
        self.cuda = device.type == "cuda"
        self.args = args
        self.warmed_card = False
        self.errors = 0
        self.gelu_probes = {}
        mha = getattr(torch.backends, "mha", None)
        self.can_switch_fastpath = mha is not None and hasattr(mha, "set_fastpath_enabled")
        self.fastpath_default = mha.get_fastpath_enabled() if self.can_switch_fastpath else True
        self.env = {
            "torch": torch.__version__,
            "cudnn": str(torch.backends.cudnn.version()) if self.cuda else None,
            "cuda": torch.version.cuda if self.cuda else None,
            "gpu": torch.cuda.get_device_name(device) if self.cuda else None,
            "device": str(device),
        }

    def set_math(self, math_mode):
        torch = self.torch
        tf32 = math_mode == "tf32"
        if math_mode != "native":
            torch.backends.cuda.matmul.allow_tf32 = tf32
            torch.backends.cudnn.allow_tf32 = tf32
            torch.set_float32_matmul_precision("high" if tf32 else "highest")

    def fastpath(self, on=None):
        """Switches PyTorch's native fast path on or off; None puts back what it was."""
        if self.can_switch_fastpath:
            self.torch.backends.mha.set_fastpath_enabled(self.fastpath_default if on is None else on)

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def time_one(self, fn):
        if self.cuda:
            a = self.torch.cuda.Event(enable_timing=True)
            b = self.torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            return a.elapsed_time(b)
        t = time.perf_counter()
        fn()
        return (time.perf_counter() - t) * 1e3

    def measure(self, fn, best_settled_ms=None):
        """Warm-up, settling unless the warm calls already lose to best_settled_ms (the group's
        best settled median so far), then the timed calls: a dict of the row's timing fields."""
        torch = self.torch
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(self.device)
        n, start = 0, time.perf_counter()

        def run_until(seconds):
            nonlocal n
            while n < WARM_MIN_CALLS or time.perf_counter() - start < seconds:
                fn()
                n += 1
                if n % 4 == 0:
                    self.sync()
            self.sync()

        run_until(WARM_MIN_S if self.warmed_card else FIRST_WARM_S)
        self.warmed_card = True

        def reps_for(per_call_s):
            return self.args.reps or max(MIN_REPS, min(MAX_REPS, math.ceil(BUDGET_S / max(per_call_s, 1e-6))))

        per_call_s = (time.perf_counter() - start) / n
        reps = reps_for(per_call_s)

        def loses(ms):
            return best_settled_ms is not None and ms > SETTLE_SKIP * best_settled_ms

        settled = not loses(per_call_s * 1e3)
        if settled:
            run_until(self.args.settle_s)
        warm_s = time.perf_counter() - start
        times = [self.time_one(fn) for _ in range(reps)]
        if not settled and not loses(statistics.median(times)):
            # Faster timed than its warm-up said (a slow first call): settled after all.
            settled = True
            run_until(self.args.settle_s)
            warm_s = time.perf_counter() - start
            reps = reps_for(statistics.median(times) / 1e3)
            times = [self.time_one(fn) for _ in range(reps)]
        peak = torch.cuda.max_memory_allocated(self.device) if self.cuda else None
        return {"median_ms": round(statistics.median(times), 4), "min_ms": round(min(times), 4), "reps": reps,
                "peak_bytes": peak, "settled": settled, "warm_s": round(warm_s, 2)}

    def capture(self, call):
        """A CUDA Graph of `call`, warmed on a side stream as PyTorch's docs ask: its replay."""
        torch = self.torch
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(3):
                call()
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            call()
        return graph

    def takes_fastpath(self, call):
        """How many layers went through torch._transformer_encoder_layer_fwd in one call."""
        torch = self.torch
        original = torch._transformer_encoder_layer_fwd
        calls = [0]

        def counted(*a, **k):
            calls[0] += 1
            return original(*a, **k)

        torch._transformer_encoder_layer_fwd = counted
        try:
            call()
        finally:
            torch._transformer_encoder_layer_fwd = original
        return calls[0]

    def fastpath_gelu(self, dtype_name):
        """Which GELU the native fast path's FFN computes in this dtype. The fast path runs the up
        projection as torch._addmm_activation(use_gelu=True), whose CUDA kernel (cuBLASLt's GELU
        epilogue, or a tanh GELU after the GEMM) is the tanh approximation, whatever the module's
        activation says. Probed, not assumed: pre-activations of about unit spread through that op,
        set against both GELUs of the same product in fp64. ("tanh" or "exact" and the distances
        {"mean_abs_to_exact", "mean_abs_to_tanh"}, or None where the op is missing.)"""
        if dtype_name in self.gelu_probes:
            return self.gelu_probes[dtype_name]
        torch = self.torch
        F = torch.nn.functional
        probe = None
        if hasattr(torch, "_addmm_activation"):
            dtype = getattr(torch, DTYPES[dtype_name])
            g = torch.Generator(device=self.device).manual_seed(0)
            a = (torch.randn(4096, 16, device=self.device, generator=g) / 4).to(dtype)
            b = torch.randn(16, 64, device=self.device, generator=g).to(dtype)
            bias = (torch.randn(64, device=self.device, generator=g) / 2).to(dtype)
            with torch.no_grad():
                out = torch._addmm_activation(bias, a, b, use_gelu=True).double()
                pre = torch.addmm(bias.double(), a.double(), b.double())
                to_exact = (out - F.gelu(pre)).abs().mean().item()
                to_tanh = (out - F.gelu(pre, approximate="tanh")).abs().mean().item()
            gelu = "tanh" if to_tanh < to_exact else "exact"
            probe = (gelu, {"mean_abs_to_exact": float(f"{to_exact:.3g}"), "mean_abs_to_tanh": float(f"{to_tanh:.3g}")})
            print(f"{dtype_name}: the fast path's FFN GELU is {gelu} (mean |difference| {to_exact:.3g} to the "
                  f"exact GELU, {to_tanh:.3g} to tanh)", flush=True)
        self.gelu_probes[dtype_name] = probe
        return probe

    def kernel_table(self, fn, label, calls=5):
        """The kernels of one call of `fn`, slowest first: [{"name", "launches", "us"}], launches
        and device microseconds per call, from torch.profiler over `calls` calls. (Graph modes
        replay the kernels of the mode they capture.)"""
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                fn()
            self.sync()
        table = []
        for avg in prof.key_averages():
            us = getattr(avg, "device_time_total", None)
            if us is None:
                us = avg.cuda_time_total
            if us > 0:
                table.append({"name": avg.key[:160], "launches": round(avg.count / calls, 2), "us": round(us / calls, 2)})
        table.sort(key=lambda k: -k["us"])
        total = sum(k["us"] for k in table)
        print(f"{label}: kernels of one call, {total:.1f} us in all", flush=True)
        for k in table[:25]:
            print(f"  {k['us']:10.2f} us {k['launches']:6g}x  {k['name'][:110]}", flush=True)
        return table

    def free(self):
        gc.collect()
        if self.cuda:
            self.torch.cuda.empty_cache()

    def run_group(self, case, dtype_name, math_mode):
        """The rows of one (case, dtype, math)."""
        torch = self.torch
        dtype = getattr(torch, DTYPES[dtype_name])
        self.set_math(math_mode)
        modes = [m for m in MODES if m != "compile" or self.args.compile]
        rows = {}
        best_settled_ms = None

        def row(mode, status, **fields):
            rows[mode] = {"case_id": case["id"], "case_name": case["name"], "dtype": dtype_name,
                          "math": math_mode, "mode": mode, "status": status,
                          "median_ms": None, "min_ms": None, "reps": None, "peak_bytes": None,
                          **fields, **self.env}

        try:
            model = build_model(case, dtype, self.device)
            x = torch.randn(case["batch"], case["seq"], case["d_model"], device=self.device, dtype=dtype)
            mask, key_padding, is_causal = build_masks(case["mask"], case["seq"], case["valid_lens"], dtype,
                                                       self.device)
        except torch.cuda.OutOfMemoryError as e:
            model = x = mask = key_padding = None
            self.free()
            for m in modes:
                row(m, "oom", reason=f"the model, input or mask does not fit: {oom_reason(e)}")
            return [rows[m] for m in modes]

        def forward(module, fast):
            """One forward of `module` (the model or its compiled form) with the fast path on or off."""
            def call():
                self.fastpath(fast)
                try:
                    return module(x, mask=mask, src_key_padding_mask=key_padding, is_causal=is_causal)
                finally:
                    self.fastpath()
            return call

        eager, fast = forward(model, False), forward(model, True)
        fast_reason = None
        with torch.no_grad():
            for mode in (m for m in MEASURE_ORDER if m in modes):
                if mode in ("fastpath", "fastpath_graph") and fast_reason:
                    row(mode, "not_applicable", reason=fast_reason)
                    continue
                if mode in ("graph", "fastpath_graph") and not self.cuda:
                    row(mode, "not_applicable", reason="CUDA Graphs need a CUDA device")
                    continue
                graph = compiled = fn = None
                try:
                    if mode == "eager":
                        fn, extra = eager, {}
                    elif mode == "fastpath":
                        if not self.can_switch_fastpath:
                            fast_reason = "this PyTorch has no torch.backends.mha.set_fastpath_enabled"
                        else:
                            layers = self.takes_fastpath(fast)
                            if layers < case["layers"]:
                                fast_reason = self.why_no_fastpath(case, layers)
                        if fast_reason:
                            row(mode, "not_applicable", reason=fast_reason)
                            continue
                        fn, extra = fast, {}
                    elif mode in ("graph", "fastpath_graph"):
                        graph = self.capture(eager if mode == "graph" else fast)
                        fn, extra = graph.replay, {}
                    else:  # compile
                        import torch._dynamo

                        torch._dynamo.reset()  # a fresh compile per shape, dtype and math
                        compiled = torch.compile(model, mode=self.args.compile_mode)
                        fn = forward(compiled, False)
                        t0 = time.perf_counter()
                        fn()
                        self.sync()
                        extra = {"compile_mode": self.args.compile_mode,
                                 "compile_s": round(time.perf_counter() - t0, 1)}
                    timing = self.measure(fn, best_settled_ms)
                    if timing["settled"] and (best_settled_ms is None or timing["median_ms"] < best_settled_ms):
                        best_settled_ms = timing["median_ms"]
                    if mode in ("fastpath", "fastpath_graph") and case["activation"] == "gelu" and self.cuda:
                        probe = self.fastpath_gelu(dtype_name)
                        if probe:
                            extra["ffn_gelu"], extra["ffn_gelu_probe"] = probe
                    if self.args.kernels and self.cuda and mode in ("eager", "fastpath"):
                        extra["kernels"] = self.kernel_table(fn, f"case {case['id']} {dtype_name} {mode}")
                    row(mode, "ok", **timing, **extra)
                except torch.cuda.OutOfMemoryError as e:
                    row(mode, "oom", reason=oom_reason(e))
                except Exception as e:  # noqa: BLE001 - the mode failed; the row says how, the run goes on
                    self.errors += 1
                    row(mode, "error", reason=f"{type(e).__name__}: {first_line(e)}")
                finally:
                    graph = compiled = fn = None
                    self.free()
                    if self.cuda:
                        torch.cuda.synchronize(self.device)
        del model, x, mask, key_padding
        self.free()
        return [rows[m] for m in modes]

    def why_no_fastpath(self, case, layers):
        """PyTorch keeps its reason to itself: the conditions of TransformerEncoderLayer.forward
        that a case can trip, in the order it checks them."""
        if case["activation"] == "gelu_tanh":
            return ("PyTorch's fast path takes only relu and exact gelu; the tanh GELU is a Python "
                    "function to it")
        if case["heads"] % 2:
            return f"PyTorch's fast path needs an even number of heads (this case has {case['heads']})"
        return (f"PyTorch took its fast path in {layers} of {case['layers']} layers "
                "(torch._transformer_encoder_layer_fwd not called); it gives no reason")


def first_line(e):
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def oom_reason(e):
    """What did not fit, without the allocator's advice: "CUDA out of memory. Tried to allocate 298.02 GiB"."""
    return ". ".join(first_line(e).split(". ")[:2]).rstrip(".")


def summary(rows):
    ok = [r for r in rows if r["status"] == "ok"]
    r0 = rows[0]
    head = f"case {r0['case_id']} {r0['case_name']} {r0['dtype']} {r0['math']}:"
    cells = []
    for r in rows:
        cells.append(f"{r['mode']} {r['median_ms']:.4g}" if r["status"] == "ok" else f"{r['mode']} {r['status']}")
    if not ok:
        return f"{head} no mode ran ({', '.join(cells)})"
    best = min(ok, key=lambda r: r["median_ms"])
    return f"{head} best {best['mode']} {best['median_ms']:.4g} ms ({', '.join(cells)})"


def write_atomically(target, rows):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(target)), prefix=".peer_pytorch.")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # as a plain open() would have made it, not mkstemp's 0600
        with os.fdopen(fd, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv):
    try:
        args, groups, target = check_inputs(argv)
    except UsageError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError as e:
        print(f"{PROG}: PyTorch is not installed ({e})", file=sys.stderr)
        return 3
    device = torch.device(args.device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            print(f"{PROG}: PyTorch {torch.__version__} sees no CUDA device", file=sys.stderr)
            return 3
        if device.index is not None and device.index >= torch.cuda.device_count():
            print(f"{PROG}: --device {args.device}: PyTorch sees {torch.cuda.device_count()} CUDA device(s)",
                  file=sys.stderr)
            return 3
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
    peer = Peer(torch, device, args)
    print(f"PyTorch {peer.env['torch']} (cuDNN {peer.env['cudnn']}) on {peer.env['gpu'] or args.device}: "
          f"{len(groups)} (case, dtype, math) groups", flush=True)
    rows = []
    try:
        for case, dtype, math_mode in groups:
            group = peer.run_group(case, dtype, math_mode)
            rows.extend(group)
            print(summary(group), flush=True)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; {target} not written", file=sys.stderr)
        return 130
    write_atomically(target, rows)
    print(f"wrote {len(rows)} rows to {target}")
    if peer.errors:
        print(f"{PROG}: {peer.errors} mode(s) failed with an error; their rows say why", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
