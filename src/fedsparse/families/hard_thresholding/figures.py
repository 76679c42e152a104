"""The hard-thresholding page's figures: the final objective over the step-size x local-steps
grid (a heatmap per algorithm) and against the data's non-IID level."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.colors import LogNorm, Normalize
from matplotlib.patches import Rectangle
from matplotlib.ticker import FuncFormatter, NullFormatter

from ...report import analysis
from ...report.figures import MAX_WIDTH_IN, colour, log_if_useful, plt

DIV_COLOUR = "#d0d0d0"
# The colour scale spans the best cell to HEATMAP_SPAN times it, or to the HEATMAP_KEEP quantile of
# the cells where that is higher: a few blown-up but finite cells (logistic data: 0.4 to 66) would
# otherwise paint the interesting range (0.40-0.97) one colour. Cells above it take the top
# colour and are marked CLIPPED.
HEATMAP_SPAN = 5.0
HEATMAP_KEEP = 0.75
CLIPPED = "▲"


def _tick(v) -> str:
    return "n/a" if pd.isna(v) else f"{v:g}"


def heatmap_figure(cells: pd.DataFrame, title: str):
    """Final objective over step size (x) x local steps (y), one panel per algorithm (the page
    draws one algorithm per figure so that each stays readable at the page's width)."""
    if cells.empty:
        return None
    algs = analysis.algorithm_order(cells["algorithm"].unique())
    xs = sorted(cells["stepsize"].unique(), key=lambda v: (pd.isna(v), v if pd.notna(v) else 0))
    ys = sorted(cells["local_steps"].unique(), key=lambda v: (pd.isna(v), v if pd.notna(v) else 0))
    vals = cells.loc[cells["valid_configs"] > 0, "best_final"]
    vals = vals[np.isfinite(vals)]
    capped = False
    if len(vals) and (vals > 0).all():
        lo, hi = float(vals.min()), float(vals.max())
        top = max(lo * HEATMAP_SPAN, float(np.quantile(vals, HEATMAP_KEEP)))
        capped = hi > top
        norm = LogNorm(lo, min(hi, top) if hi > lo else lo * 10)
    elif len(vals):
        lo, hi = float(vals.min()), float(vals.max())
        norm = Normalize(lo, hi if hi > lo else lo + 1)
    else:
        norm = LogNorm(1, 10)
    cmap = plt.get_cmap("viridis").with_extremes(bad="white")
    # at most the page's width (about 1100 px at DPI): many step sizes get narrower cells
    cell = min(0.6, (MAX_WIDTH_IN - 1.8) / len(algs) / max(1, len(xs)) - 0.1)
    width = max(4.0, cell * len(xs) + 1.6)
    small = cell < 0.55  # cell text and ticks that fit a narrow cell
    height = 0.55 * len(ys) + (2.8 if small else 2.4)
    total = min(MAX_WIDTH_IN, width * len(algs) + 1.8)
    fig, axes = plt.subplots(1, len(algs), figsize=(total, height), squeeze=False)
    fig.subplots_adjust(
        left=0.9 / total,
        right=1 - 1.1 / total,
        wspace=0.25,
        bottom=(1.15 if small else 0.75) / height,  # room for slanted step-size ticks
        top=1 - 0.75 / height,
    )
    xi = {_tick(v): i for i, v in enumerate(xs)}
    yi = {_tick(v): i for i, v in enumerate(ys)}
    image = None
    for ax, alg in zip(axes[0], algs, strict=True):
        c = cells[cells["algorithm"] == alg]
        grid = np.full((len(ys), len(xs)), np.nan)
        cx = c["stepsize"].map(_tick).map(xi).to_numpy()
        cy = c["local_steps"].map(_tick).map(yi).to_numpy()
        ok = (c["valid_configs"] > 0).to_numpy()
        grid[cy[ok], cx[ok]] = c["best_final"].to_numpy()[ok]
        image = ax.imshow(
            np.ma.masked_invalid(grid), origin="lower", cmap=cmap, norm=norm, aspect="auto"
        )
        for x, y, text, good in zip(cx, cy, c["cell"], ok, strict=True):
            if not good:
                if text == "div":
                    ax.add_patch(
                        Rectangle(
                            (x - 0.5, y - 0.5),
                            1,
                            1,
                            facecolor=DIV_COLOUR,
                            edgecolor="#a00000",
                            hatch="///",
                            lw=0.8,
                        )
                    )
                ax.text(
                    x,
                    y,
                    text,
                    ha="center",
                    va="center",
                    fontsize=9,
                    color="#a00000",
                    fontweight="bold",
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.5},
                )
                continue
            shade = norm(grid[y, x])
            above = capped and grid[y, x] > norm.vmax
            ax.text(
                x,
                y,
                f"{text}{CLIPPED}" if above else text,
                ha="center",
                va="center",
                fontsize=7 if small else 8,
                color="white" if np.ma.filled(shade, 0) < 0.55 else "black",
            )
        ax.set_xticks(range(len(xs)), [_tick(v) for v in xs], rotation=60 if small else 0)
        ax.set_yticks(range(len(ys)), [_tick(v) for v in ys])
        ax.set_xlabel(f"step size {analysis.symbol(alg, 'stepsize')}")
        ax.set_ylabel(f"local steps {analysis.symbol(alg, 'local_steps')}")
        ax.set_title(analysis.label(alg))
    bar = fig.colorbar(
        image,
        ax=axes[0].tolist(),
        fraction=0.04,
        pad=0.02,
        extend="max" if capped else "neither",
        label="final objective (mean over seeds; log)"
        if isinstance(norm, LogNorm)
        else "final objective (mean over seeds)",
    )
    short = FuncFormatter(lambda v, _: f"{v:.3g}")
    bar.ax.yaxis.set_major_formatter(short)
    bar.ax.yaxis.set_minor_formatter(
        short if isinstance(norm, LogNorm) and norm.vmax / norm.vmin < 30 else NullFormatter()
    )
    clipped = f"; {CLIPPED} = above the colour scale" if capped else ""
    fig.suptitle(
        f"{title}: final objective, best over the other hyperparameters "
        f"('div' = every configuration diverged{clipped})",
        fontsize=10,
    )
    return fig


def noniid_figure(table: pd.DataFrame, title: str):
    """Best final objective of each algorithm against the (alpha, beta) level."""
    meta = {"task", "loss", "section", "alpha", "beta"}
    algs = analysis.algorithm_order([c for c in table.columns if c not in meta])
    if table.empty or not algs:
        return None
    labels = [f"α={a:g}\nβ={b:g}" for a, b in zip(table["alpha"], table["beta"], strict=True)]
    if len(set(labels)) < len(labels):
        labels = [f"{lab}\n{s}" for lab, s in zip(labels, table["section"], strict=True)]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.4 * len(table) + 2.5), 4.4))
    fig.subplots_adjust(left=0.13, right=0.97, top=0.9, bottom=0.2)
    x = np.arange(len(table))
    for alg in algs:
        ax.plot(x, table[alg], marker="o", color=colour(alg), label=analysis.label(alg))
    ax.set_xticks(x, labels)
    ax.set_xlim(-0.4, len(table) - 0.6)
    ax.set_xlabel("non-IID level (α: local models differ, β: local data differ)")
    ax.set_ylabel("best final objective (mean over seeds)")
    log_if_useful(ax, table[algs].stack())
    ax.grid(alpha=0.3)
    ax.legend(frameon=False)
    ax.set_title(title, fontsize=11)
    return fig
