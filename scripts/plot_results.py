#!/usr/bin/env python3
"""Draws the charts of a tlbench analysis: per dtype a heatmap of configurations x cases
(speedup over the reference) and a bar chart of what each technique buys, as PNG; where the
run recorded stage times (run --stage-times), also per dtype a stacked bar per case of the
reference's and the best configuration's stages.

    tlbench report RESULTS                 # writes RESULTS/analysis/*.json
    python3 scripts/plot_results.py RESULTS/analysis [--out DIR] [--dtypes fp16,bf16]

The input is the analysis folder (or a results folder that holds one); charts go beside the
JSON unless --out says otherwise. Needs matplotlib (Debian: python3-matplotlib), nothing else.
"""
import argparse
import csv
import json
import math
import os
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    from matplotlib import colors
    from matplotlib.patches import Rectangle
except ImportError:
    sys.exit("plot_results: matplotlib is missing (Debian/Ubuntu: apt-get install "
             "python3-matplotlib; then run this script with the system python3)")

DPI = 110
UNMEASURED_TEXT = {"nonviable": "n/a", "oom": "oom", "error": "err", "missing": ""}


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        sys.exit(f"plot_results: {path}: {e.strerror}")
    except json.JSONDecodeError as e:
        sys.exit(f"plot_results: {path}: not valid JSON: {e}")


def find_analysis_dir(path):
    if os.path.isfile(os.path.join(path, "analysis.json")):
        return path
    nested = os.path.join(path, "analysis")
    if os.path.isfile(os.path.join(nested, "analysis.json")):
        return nested
    if os.path.isfile(os.path.join(path, "points.jsonl")):
        sys.exit(f"plot_results: {path} is a results folder without an analysis; "
                 f"run `tlbench report {path}` first")
    sys.exit(f"plot_results: {path}: no analysis.json here (run `tlbench report` first)")


def dtype_title(group):
    g = group["group"]
    if group.get("dtype") == "fp32" and group.get("math"):
        return f"{g} ({group['math']} math)"
    return g


def speedup_ticks(lim):
    """Colour-bar ticks (in log2 space) at round speedups within +-lim, spaced for reading."""
    if lim < 0.5:
        candidates = [0.8, 0.9, 1.0, 1.1, 1.25, 1.4]
    elif lim < 1.6:
        candidates = [1 / 3, 0.5, 2 / 3, 1.0, 1.5, 2, 3]
    else:
        candidates = [1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0, 2, 4, 8, 16, 32]
    return [math.log2(v) for v in candidates if abs(math.log2(v)) <= lim + 1e-9]


def ratio_ticks(low, high):
    """Round ratios for a log axis spanning [low, high], at most about eight of them."""
    candidates = [0.25, 0.33, 0.5, 0.67, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.5, 1.75, 2, 2.5, 3, 4,
                  5, 6, 8, 10, 15, 20]
    inside = [v for v in candidates if low <= v <= high]
    while len(inside) > 8:
        keep = inside[::2]
        if 1.0 in inside and 1.0 not in keep:
            keep = sorted(set(keep) | {1.0})
        inside = keep
    return inside


def id_ranges(ids):
    """[1, 2, 3, 5, 7, 8] -> "1-3, 5, 7-8"."""
    parts, start, prev = [], None, None
    for i in sorted(ids):
        if start is None:
            start = prev = i
        elif i == prev + 1:
            prev = i
        else:
            parts.append(f"{start}-{prev}" if prev > start else f"{start}")
            start = prev = i
    if start is not None:
        parts.append(f"{start}-{prev}" if prev > start else f"{start}")
    return ", ".join(parts)


def fmt_speedup(v):
    return f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def plot_heatmap(hm, device, out_path):
    rows, cols = hm["rows"], hm["cols"]
    values, status, golden = hm["values"], hm["status"], hm["golden_pass"]
    best_row = hm.get("best_row", [None] * len(cols))
    nr, nc = len(rows), len(cols)
    measured = [v for row in values for v in row if v is not None and v > 0]
    if not measured:
        print(f"plot_results: {hm['group']}: no measured point, heatmap skipped")
        return None

    # Colour is log2(speedup) on a symmetric range: 2x faster is as blue as 2x slower is red.
    lim = max(max(abs(math.log2(v)) for v in measured), math.log2(1.1))
    norm = colors.TwoSlopeNorm(vcenter=0.0, vmin=-lim, vmax=lim)
    cmap = plt.get_cmap("RdBu")
    grid = [[math.log2(v) if v is not None and v > 0 else float("nan") for v in row]
            for row in values]

    cell_w, cell_h = 0.78, 0.3
    label_w = 2.6
    fig_w = label_w + cell_w * nc + 1.6
    fig_h = 2.4 + cell_h * nr
    fig, ax = plt.subplots(figsize=(fig_w, fig_h), dpi=DPI)
    masked = [[x for x in row] for row in grid]
    image = ax.imshow(masked, cmap=cmap, norm=norm, aspect="auto", interpolation="nearest")
    image.cmap.set_bad("white")

    font = 7.5 if nc <= 16 else 6.5
    any_fallback = False
    for r in range(nr):
        for c in range(nc):
            v = values[r][c]
            if v is None or v <= 0:
                st = status[r][c]
                if st == "missing":  # not part of this run: left blank, unlike nonviable
                    continue
                ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, facecolor="#d9d9d9",
                                       edgecolor="#a6a6a6", hatch="///", linewidth=0))
                text = UNMEASURED_TEXT.get(st, "fb" if st.startswith("fallback") else st[:4])
                if text:
                    ax.text(c, r, text, ha="center", va="center", fontsize=font - 0.5,
                            color="#404040", bbox=dict(boxstyle="square,pad=0.1", fc="#d9d9d9",
                                                       ec="none"))
                continue
            shade = norm(grid[r][c])
            ink = "white" if abs(shade - 0.5) > 0.32 else "black"
            text = fmt_speedup(v)
            if status[r][c].startswith("fallback"):
                text += "\u2020"
                any_fallback = True
            if golden[r][c] is False:
                text += "*"
            ax.text(c, r, text, ha="center", va="center", fontsize=font, color=ink)
    for c, r in enumerate(best_row):
        if r is not None:
            ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, edgecolor="black",
                                   linewidth=2.6))
            ax.add_patch(Rectangle((c - 0.44, r - 0.4), 0.88, 0.8, fill=False,
                                   edgecolor="white", linewidth=1.0))

    ax.set_yticks(range(nr))
    ax.set_yticklabels([row["config"] if row["names"] == row["config"]
                        else f"{row['config']}  {row['names']}" for row in rows], fontsize=8,
                       family="monospace")
    ax.set_xticks(range(nc))
    ax.set_xticklabels([c["label"] for c in cols], fontsize=8, rotation=35, ha="right",
                       rotation_mode="anchor")
    ax.set_xticks([x - 0.5 for x in range(1, nc)], minor=True)
    ax.set_yticks([y - 0.5 for y in range(1, nr)], minor=True)
    ax.grid(which="minor", color="white", linewidth=0.6)
    ax.tick_params(which="minor", length=0)
    ax.set_xlabel("case")
    techniques = hm.get("techniques") or []
    ax.set_ylabel(f"configuration (bits: {' '.join(techniques)})" if techniques
                  else "configuration")

    where = f"{device}, " if device else ""
    ax.set_title(f"Speedup over the reference: {where}{dtype_title(hm)}", fontsize=11, pad=10)
    # A colour bar of fixed physical width, whatever the number of cases.
    bar = fig.colorbar(image, ax=ax, fraction=min(0.05, 0.2 / (cell_w * nc)),
                       pad=0.02)
    ticks = speedup_ticks(lim)
    bar.set_ticks(ticks)
    bar.set_ticklabels([f"{2 ** t:.3g}x" for t in ticks])
    bar.set_label("speedup (log scale, centred on 1.0)")
    notes = ["outlined: best configuration passing the golden check",
             "n/a (hatched): nonviable", "blank: not in this run", "* failed the golden check"]
    if any_fallback:
        notes.append("\u2020 a stage fell back to the reference")
    if any(c.get("baseline", "").strip("0") for c in cols):
        notes.append("(vs 01000): timed against attn-only, the dense reference does not fit")
    # One note per line when the figure is narrow, so nothing runs off the edge.
    per_line = max(1, int(fig_w // 5))
    lines = ["; ".join(notes[i:i + per_line]) for i in range(0, len(notes), per_line)]
    fig.text(0.01, 0.005, "\n".join(lines), fontsize=8, ha="left", va="bottom",
             color="#333333")
    footer = (0.18 * len(lines) + 0.1) / fig_h
    fig.tight_layout(rect=(0, footer, 1, 1))
    fig.savefig(out_path)
    plt.close(fig)
    return out_path


def plot_effects(eff, device, out_path):
    techs = eff["techniques"]
    if not techs:
        print(f"plot_results: {eff['group']}: {eff.get('note') or 'no effects'}; "
              "bar chart skipped")
        return None
    by_case = eff.get("by_case", [])
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13.5, 5.6), dpi=DPI,
                                  gridspec_kw={"width_ratios": [1, 1.25]})
    names = [t["technique"] for t in techs]
    x = list(range(len(techs)))
    w = 0.38

    def bars(key, offset, colour, label):
        vals = [t[key]["value"] for t in techs]
        err = [[t[key]["value"] - t[key]["low"] for t in techs],
               [t[key]["high"] - t[key]["value"] for t in techs]]
        ax.bar([i + offset for i in x], vals, w, yerr=err, capsize=3, color=colour,
               edgecolor="black", linewidth=0.5, label=label, error_kw={"linewidth": 1})
        return vals

    off = bars("mean_off", -w / 2, "#bdbdbd", "technique off")
    on = bars("mean_on", w / 2, "#2166ac", "technique on")
    top = max(max(off), max(on))
    for i, t in enumerate(techs):
        r = t["ratio"]
        ax.text(i, max(off[i], on[i]) + top * 0.03,
                f"x{r['value']:.3f}\n[{r['low']:.3f}, {r['high']:.3f}]",
                ha="center", va="bottom", fontsize=7.5)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_ylim(0, top * 1.25)
    ax.set_xticks(x)
    ax.set_xticklabels(names)
    ax.set_ylabel("mean speedup over the reference")
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    cases = id_ranges(eff.get("cases_used", []))
    ax.set_title(f"Mean speedup with vs without each technique\n(cases {cases}; "
                 "label: geometric-mean ratio on/off)", fontsize=9.5)

    # Right: the main effect within each case, where the technique pays and where it does not.
    if by_case:
        n = len(by_case)
        bw = 0.8 / n
        cmap = plt.get_cmap("tab20" if n > 10 else "tab10")
        lows, highs = [], []
        for j, case in enumerate(by_case):
            ratios = {e["technique"]: e["ratio"] for e in case["effects"]}
            vals = [ratios[nm]["value"] for nm in names]
            err = [[ratios[nm]["value"] - ratios[nm]["low"] for nm in names],
                   [ratios[nm]["high"] - ratios[nm]["value"] for nm in names]]
            pos = [i - 0.4 + bw * (j + 0.5) for i in x]
            # Bars grow from 1.0, so a technique that slows a case points down.
            ax2.bar(pos, [v - 1.0 for v in vals], bw, bottom=1.0, yerr=err, capsize=1.5,
                    color=cmap(j % cmap.N), edgecolor="black", linewidth=0.3,
                    error_kw={"linewidth": 0.7}, label=f"{case['case_id']} {case['case_name']}")
            lows.extend(ratios[nm]["low"] for nm in names)
            highs.extend(ratios[nm]["high"] for nm in names)
        ax2.set_yscale("log")
        low, high = min(min(lows), 1.0) / 1.04, max(max(highs), 1.0) * 1.04
        ax2.set_ylim(low, high)
        ax2.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
        ax2.set_xticks(x)
        ax2.set_xticklabels(names)
        ticks = ratio_ticks(low, high)
        ax2.yaxis.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
        ax2.yaxis.set_major_formatter(matplotlib.ticker.FixedFormatter([f"{v:g}x" for v in ticks]))
        ax2.yaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax2.set_ylabel("geometric-mean speedup ratio, on / off")
        ax2.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        ax2.set_title("Effect of each technique per case (main effect)", fontsize=9.5)
    else:
        ax2.axis("off")

    where = f"{device}, " if device else ""
    level = eff.get("ci_level")
    level_text = f"{level * 100:.0f}% " if level else ""
    fig.suptitle(f"What each technique buys: {where}{dtype_title(eff)}", fontsize=11)
    fig.text(0.01, 0.005, f"Error bars: {level_text}measurement intervals of the points, "
             "combined (noise of the timing, not spread across cases or configurations).",
             fontsize=7.5, ha="left", va="bottom", color="#333333")
    fig.tight_layout(rect=(0, 0.03, 1, 0.96))
    fig.savefig(out_path)
    plt.close(fig)
    return out_path


STAGES = ["ln1", "qkv", "attn", "out_proj", "ln2", "ffn_up", "ffn_down"]
STAGE_COLOURS = ["#c6dbef", "#6baed6", "#d94801", "#2171b5", "#9ecae1", "#41ab5d", "#006d2c"]


def plot_stage_breakdown(csv_path, group, device, out_path):
    """Per case two bars, the reference's and the best configuration's (or the auto point's,
    where the run timed the stages of the reference and auto only), each as long as its
    forward relative to the reference's forward (the best bar is shorter by its speedup), cut
    into its stages in the proportions of their times. The stage times come from the same
    forward (a graph configuration's replay) with events between the stages and without PDL,
    less the events' own cost, while the bar's length is the forward with PDL: the
    proportions are those without it. Each stage's floor is a black tick inside
    its segment, as the share of the stage's time the floor is."""
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    cases = []
    for r in rows:
        if r["case_id"] not in [c[0] for c in cases]:
            cases.append((r["case_id"], r["case_name"]))
    by = {(r["case_id"], r["role"]): r for r in rows}
    fig, ax = plt.subplots(figsize=(11, 0.55 * 2 * len(cases) + 1.6), dpi=DPI)
    y = 0
    for cid, name in cases:
        ref = by.get((cid, "reference"))
        total = float(ref["forward_ms"]) if ref else None
        for role in ("reference", "best", "auto"):
            r = by.get((cid, role))
            if not r:
                continue
            length = float(r["forward_ms"]) / (total or float(r["forward_ms"]))
            stages_ms = float(r["stages_ms"])
            left = 0.0
            for s, colour in zip(STAGES, STAGE_COLOURS):
                stage_ms = float(r[f"{s}_ms"])
                w = stage_ms / stages_ms * length if stages_ms > 0 else 0.0
                ax.barh(y, w, left=left, color=colour, edgecolor="white", linewidth=0.4,
                        label=s if y == 0 else None)
                fl = r.get(f"{s}_floor_ms")
                if fl and stage_ms > 0:
                    at = left + min(float(fl) / stage_ms, 1.0) * w
                    ax.plot([at] * 2, [y - 0.35, y + 0.35], color="black", linewidth=0.8)
                left += w
            y += 1
        y += 0.5
    ticks, pos, yy = [], [], 0
    for cid, name in cases:
        for role in ("reference", "best", "auto"):
            if (cid, role) in by:
                own = "" if (cid, "reference") in by else ", its own total"
                ticks.append(f"case {cid} {role} ({by[(cid, role)]['config']}{own})")
                pos.append(yy)
                yy += 1
        yy += 0.5
    ax.set_yticks(pos)
    ax.set_yticklabels(ticks, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("forward time over the reference's, cut in the proportions of its stage times\n"
                  "(events between stages, without PDL, less their own cost); black ticks: each stage's floor "
                  "as a share of its time",
                  fontsize=9)
    ax.set_title(f"Where the time goes, {group}" + (f" — {device}" if device else ""))
    ax.legend(ncol=1, fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(out_path)
    plt.close(fig)
    return out_path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("analysis", help="analysis folder written by `tlbench report` "
                                     "(or a results folder holding analysis/)")
    ap.add_argument("--out", help="folder for the PNG files (default: the analysis folder)")
    ap.add_argument("--dtypes", help="comma-separated groups to draw, e.g. fp16,bf16")
    args = ap.parse_args()

    src = find_analysis_dir(args.analysis)
    index = load_json(os.path.join(src, "analysis.json"))
    out = args.out or src
    os.makedirs(out, exist_ok=True)
    wanted = set(args.dtypes.split(",")) if args.dtypes else None
    written = []
    for group in index.get("groups", []):
        g = group["group"]
        if wanted and g not in wanted and group.get("dtype") not in wanted:
            continue
        hm = load_json(os.path.join(src, group.get("heatmap", f"heatmap_{g}.json")))
        eff = load_json(os.path.join(src, group.get("effects", f"effects_{g}.json")))
        device = index.get("device", "")
        for path in (plot_heatmap(hm, device, os.path.join(out, f"heatmap_{g}.png")),
                     plot_effects(eff, device, os.path.join(out, f"effects_{g}.png"))):
            if path:
                written.append(path)
        stages = os.path.join(src, f"stage_breakdown_{g}.csv")
        if os.path.exists(stages):
            written.append(plot_stage_breakdown(stages, g, device,
                                                os.path.join(out, f"stage_breakdown_{g}.png")))
    if not written:
        sys.exit("plot_results: nothing drawn")
    for path in written:
        print(path)


if __name__ == "__main__":
    main()
