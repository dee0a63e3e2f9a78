#!/usr/bin/env python3
"""Runs a `tlbench export` file through PyTorch and compares the outputs.

Builds torch.nn.TransformerEncoder(TransformerEncoderLayer(d_model, nhead, dim_feedforward,
dropout=0, activation, batch_first=True, norm_first=True, layer_norm_eps), num_layers) in eval
mode in the file's dtype, loads the exported weights (strict), runs the exported input with the
case's mask under torch.no_grad(), and prints PyTorch's output against tlbench's reference and
golden outputs: max abs error, rel-L2, and the strict criterion |a - b| <= atol + rtol |b| (a =
PyTorch, b = tlbench) over every compared element.

  check_pytorch.py FILE.safetensors [--device cuda] [--atol 0.002] [--rtol 0.02]
  check_pytorch.py --describe FILE.safetensors   # header only: needs neither torch nor a GPU

Exit: 0 strict pass against the reference output, 1 strict failure (or NaN), 2 unusable file
or arguments, 3 PyTorch or the device missing.
"""

import argparse
import json
import struct
import sys

DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}
ST_DTYPES = {"F16": "float16", "BF16": "bfloat16", "F32": "float32", "I32": "int32"}
ST_BYTES = {"F16": 2, "BF16": 2, "F32": 4, "I32": 4}


class UsageError(Exception):
    pass


def read_header(path):
    """(metadata, {name: {dtype, shape, data_offsets}}, data_start) from the file's header."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) != 8:
                raise UsageError(f"{path}: too short for a safetensors file")
            (n,) = struct.unpack("<Q", head)
            text = f.read(n)
            if len(text) != n:
                raise UsageError(f"{path}: header length {n} runs past the end of the file")
    except OSError as e:
        raise UsageError(f"{path}: {e.strerror}") from e
    try:
        header = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UsageError(f"{path}: header is not JSON ({e})") from e
    meta = header.pop("__metadata__", {})
    return meta, header, 8 + n


def describe(path):
    meta, tensors, start = read_header(path)
    print(f"{path}: header {start - 8} bytes, data from byte {start}")
    for k, v in meta.items():
        print(f"  meta {k} = {v}")
    for name, t in tensors.items():
        a, b = t["data_offsets"]
        print(f"  {name} {t['dtype']} {t['shape']} [{a}, {b})")
    return 0


def load_tensors(path, device):
    """All tensors of the file on `device`: through `safetensors` when installed, else read
    directly (the format is simple enough)."""
    import torch

    try:
        from safetensors.torch import load_file

        return load_file(path, device=str(device))
    except ImportError:
        pass
    _, tensors, start = read_header(path)
    out = {}
    with open(path, "rb") as f:
        for name, t in tensors.items():
            a, b = t["data_offsets"]
            f.seek(start + a)
            buf = bytearray(f.read(b - a))
            dt = getattr(torch, ST_DTYPES[t["dtype"]])
            x = torch.frombuffer(buf, dtype=dt) if buf else torch.empty(0, dtype=dt)
            out[name] = x.reshape(t["shape"]).to(device)
    return out


def build_model(meta, dtype, device):
    import torch
    import torch.nn.functional as F

    act = meta["activation"]
    if act == "gelu":
        activation = "gelu"  # exact erf GELU
    elif act == "relu":
        activation = "relu"
    elif act == "gelu_tanh":
        activation = lambda x: F.gelu(x, approximate="tanh")  # noqa: E731
    else:
        raise UsageError(f"unknown activation '{act}' in the file's metadata")
    layer = torch.nn.TransformerEncoderLayer(
        int(meta["d_model"]), int(meta["heads"]), int(meta["d_ff"]), dropout=0.0,
        activation=activation, layer_norm_eps=float(meta["eps"]), batch_first=True,
        norm_first=True, device=device, dtype=dtype)
    model = torch.nn.TransformerEncoder(layer, int(meta["layers"]), enable_nested_tensor=False)
    return model.eval()


def build_masks(kind, seq, valid_lens, dtype, device):
    """(mask, src_key_padding_mask, is_causal) for nn.TransformerEncoder's forward: `causal` as
    the float [seq, seq] mask with the is_causal hint (PyTorch wants both), `padding` as a bool
    [batch, seq] key mask (True = padded key) from the valid lengths (a list or a tensor)."""
    import torch

    if kind == "causal":
        mask = torch.nn.Transformer.generate_square_subsequent_mask(seq, device=device, dtype=dtype)
        return mask, None, True
    if kind == "padding":
        lens = torch.as_tensor(valid_lens, device=device).to(torch.int64)
        positions = torch.arange(seq, device=device)
        return None, positions[None, :] >= lens[:, None], None
    return None, None, None


def compare(a, b, atol, rtol):
    """PyTorch `a` against tlbench `b`, both [rows, d], in float64."""
    import torch

    a = a.double()
    b = b.double()
    nonfinite = int((~torch.isfinite(a)).sum()) + int((~torch.isfinite(b)).sum())
    diff = (a - b).abs()
    allowed = atol + rtol * b.abs()
    outside_mask = ~(diff <= allowed)  # NaN counts as outside
    outside = int(outside_mask.sum())
    den = torch.linalg.vector_norm(b).item()
    # The element closest to (or furthest past) its tolerance, to show what a failure is made of.
    excess = torch.nan_to_num(diff - allowed, nan=float("inf"))
    worst = int(torch.argmax(excess)) if excess.numel() else 0
    return {
        "worst": (worst // b.shape[1], worst % b.shape[1]) if excess.numel() else None,
        "worst_a": a.reshape(-1)[worst].item() if excess.numel() else None,
        "worst_b": b.reshape(-1)[worst].item() if excess.numel() else None,
        "worst_allowed": allowed.reshape(-1)[worst].item() if excess.numel() else None,
        "max_abs": diff.max().item() if diff.numel() else 0.0,
        "rel_l2": torch.linalg.vector_norm(a - b).item() / den if den > 0 else float("inf"),
        "outside": outside,
        "outside_mask": outside_mask,
        "nonfinite": nonfinite,
        "n": diff.numel(),
        "strict": outside == 0 and nonfinite == 0,
    }


def line(label, m, atol, rtol):
    verdict = "PASS" if m["strict"] else "FAIL"
    extra = f", {m['nonfinite']} non-finite" if m["nonfinite"] else ""
    return (f"{label}: max abs {m['max_abs']:.3e}, rel-L2 {m['rel_l2']:.3e}, strict "
            f"(|a-b| <= {atol:g} + {rtol:g}|b|) {verdict} ({m['outside']} of {m['n']} outside{extra})")


def check(args):
    meta, header, _ = read_header(args.file)
    for key in ("d_model", "heads", "d_ff", "layers", "mask", "activation", "eps", "dtype"):
        if key not in meta:
            raise UsageError(f"{args.file}: metadata has no '{key}' (not a tlbench export?)")
    if "golden_output" not in header and "reference_output" not in header:
        raise UsageError(f"{args.file}: holds no outputs to compare "
                         f"({meta.get('outputs', 'exported without outputs')})")
    try:
        import torch
    except ImportError:
        print("check_pytorch: PyTorch is not installed", file=sys.stderr)
        return 3
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("check_pytorch: no CUDA device visible to PyTorch", file=sys.stderr)
        return 3
    dtype = getattr(torch, DTYPES[meta["dtype"]])
    if dtype == torch.float32:
        # tlbench's reference and golden are IEEE fp32: no TF32 shortcuts here either.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")

    tensors = load_tensors(args.file, device)
    model = build_model(meta, dtype, device)
    state = {k: v for k, v in tensors.items() if k.startswith("layers.")}
    model.load_state_dict(state, strict=True)
    x = tensors["input"]
    batch, seq, d = x.shape

    mask, key_padding, is_causal = build_masks(meta["mask"], seq, tensors.get("valid_lens"), dtype, device)
    valid_rows = torch.ones(batch, seq, dtype=torch.bool, device=device)
    note = ""
    if key_padding is not None:
        valid_rows = ~key_padding
        note = (f"padding mask: comparing the {int(valid_rows.sum())} valid query rows of "
                f"{batch * seq} (PyTorch's fast path may zero padded rows)")

    with torch.no_grad():
        out = model(x, mask=mask, src_key_padding_mask=key_padding, is_causal=is_causal)

    rows = valid_rows.reshape(-1)
    ours = out.reshape(-1, d)[rows]
    print(f"{args.file}: case {meta.get('case_id', '?')} {meta.get('case_name', '')} "
          f"{meta['dtype']}, batch {batch} seq {seq} d_model {d} heads {meta['heads']} "
          f"layers {meta['layers']} mask {meta['mask']} activation {meta['activation']}")
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}"
          f"; eval + no_grad (PyTorch may take its fused fast path)")
    if note:
        print(note)
    if "reference_output" in meta:
        print(f"reference_output: {meta['reference_output']}")

    results = {}
    for name in ("reference_output", "golden_output"):
        if name in tensors:
            results[name] = compare(ours, tensors[name].reshape(-1, d)[rows], args.atol, args.rtol)
    if "reference_output" in results and "golden_output" in tensors:
        ref_vs_golden = compare(tensors["reference_output"].reshape(-1, d)[rows],
                                tensors["golden_output"].reshape(-1, d)[rows], args.atol, args.rtol)
    else:
        ref_vs_golden = None

    if "reference_output" in results:
        print(line("pytorch vs reference_output", results["reference_output"], args.atol, args.rtol))
    else:
        print(f"pytorch vs reference_output: not in the file ({meta.get('reference_output', '')})")
    if "reference_output" in results and results["reference_output"]["worst"] is not None:
        m = results["reference_output"]
        r, c = m["worst"]
        row = int(torch.nonzero(rows)[r])  # back to the [batch * seq] row
        golden = ""
        if "golden_output" in tensors:
            golden = f", golden {tensors['golden_output'].reshape(-1, d)[row, c].item():.6g}"
        print(f"  closest to its bound: batch {row // seq} token {row % seq} column {c}: pytorch "
              f"{m['worst_a']:.6g}, reference {m['worst_b']:.6g}{golden}, |a-b| "
              f"{abs(m['worst_a'] - m['worst_b']):.3g} vs allowed {m['worst_allowed']:.3g}")
    if "reference_output" in results and results["reference_output"]["outside"] and "golden_output" in tensors:
        # Which side of a disagreement is off: the fp32 golden (same rounded inputs and
        # weights) is nearer the exact result than either half-precision path.
        m = results["reference_output"]
        a = ours.double()
        b = tensors["reference_output"].reshape(-1, d)[rows].double()
        gold = tensors["golden_output"].reshape(-1, d)[rows].double()
        nearer = int(((b - gold).abs() < (a - gold).abs())[m["outside_mask"]].sum())
        print(f"  of the {m['outside']} element(s) outside, tlbench's reference is nearer the golden "
              f"than PyTorch in {nearer}")
    if "golden_output" in results:
        print(line("pytorch vs golden_output   ", results["golden_output"], args.atol, args.rtol))
    if ref_vs_golden is not None:
        print(f"reference_output vs golden: rel-L2 {ref_vs_golden['rel_l2']:.3e} "
              f"(pytorch vs golden: {results['golden_output']['rel_l2']:.3e})")
    # PyTorch's other path over the same weights: its fused fast path and its eager path round
    # differently, and how far apart they land is the spread any third implementation has to
    # live with.
    mha = getattr(torch.backends, "mha", None)
    if mha is not None and hasattr(mha, "set_fastpath_enabled"):
        was = mha.get_fastpath_enabled()
        mha.set_fastpath_enabled(not was)
        try:
            with torch.no_grad():
                other = model(x, mask=mask, src_key_padding_mask=key_padding, is_causal=is_causal)
        finally:
            mha.set_fastpath_enabled(was)
        other = other.reshape(-1, d)[rows]
        path = "eager path" if was else "fast path"
        if "reference_output" in tensors:
            print(line(f"pytorch ({path}) vs reference_output",
                       compare(other, tensors["reference_output"].reshape(-1, d)[rows], args.atol, args.rtol),
                       args.atol, args.rtol))
        print(line(f"pytorch default vs pytorch {path}", compare(ours, other, args.atol, args.rtol),
                   args.atol, args.rtol))
    judged = "reference_output" if "reference_output" in results else "golden_output"
    ok = results[judged]["strict"]
    print(f"RESULT: {'PASS' if ok else 'FAIL'}: PyTorch vs tlbench's {judged} "
          f"{'within' if ok else 'outside'} the strict tolerance")
    return 0 if ok else 1


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("file", help="a file written by `tlbench export`")
    p.add_argument("--describe", action="store_true",
                   help="print the header (metadata and tensors) and stop; no PyTorch needed")
    p.add_argument("--device", default="cuda", help="torch device (default: cuda)")
    p.add_argument("--atol", type=float, default=0.002)
    p.add_argument("--rtol", type=float, default=0.02)
    args = p.parse_args(argv)
    try:
        return describe(args.file) if args.describe else check(args)
    except UsageError as e:
        print(f"check_pytorch: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
