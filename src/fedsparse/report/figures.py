"""The report's figures (matplotlib, Agg backend). Each function returns a Figure or None."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ..algorithms import ALGORITHMS  # noqa: E402
from .analysis import algorithm_order, label  # noqa: E402

DPI = 110
# the colours the algorithms declare (Algorithm.colour); the others take a spare one, as do
# those whose colour only their family's page uses (Algorithm.shared_pages_by_name)
_FIXED = {
    name: cls.colour
    for name, cls in ALGORITHMS.items()
    if cls.colour and not cls.shared_pages_by_name
}
_SPARE = ["tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan"]
MAX_WIDTH_IN = 10.0  # a figure's width at most: 1100 px at DPI, the page's text width


def colour(algorithm: str) -> str:
    if algorithm in _FIXED:
        return _FIXED[algorithm]
    return _SPARE[sum(map(ord, algorithm)) % len(_SPARE)]


def log_if_useful(ax, values: pd.Series, axis: str = "y") -> None:
    """Set a log scale on ``ax`` where the finite values are all positive and span over 10x.

    Parameters
    ----------
    ax
        The matplotlib axes.
    values
        The values plotted on that axis.
    axis
        ``"y"``, or anything else for x.
    """
    v = values[np.isfinite(values)]
    if len(v) and (v > 0).all() and v.max() / v.min() > 10:
        (ax.set_yscale if axis == "y" else ax.set_xscale)("log")


def objective_figure(curves: pd.DataFrame, configs: dict[str, str], fstar: float, title: str):
    """The objective against rounds, local iterations and bytes, and its gap to the best seen.

    Parameters
    ----------
    curves
        Seed-averaged curves: ``algorithm``, ``round``, ``local_iterations``, ``bytes``, and
        ``mean``, ``min``, ``max`` of the objective over ``n`` seeds.
    configs
        Algorithm to its configuration's label, shown in the legend.
    fstar
        The lowest objective of any run on the data set (plotted or not): the gap's f̂.
    title
        The data set's title.

    Returns
    -------
    matplotlib.figure.Figure or None
        A 2x2 figure (a min-max band where there are several seeds); None for no curves.
    """
    if curves.empty:
        return None
    # fixed margins: constrained layout would double the (already dominant) drawing time
    fig, axes = plt.subplots(2, 2, figsize=(11, 8.2))
    fig.subplots_adjust(left=0.07, right=0.98, top=0.93, bottom=0.2, hspace=0.28, wspace=0.2)
    panels = [
        (axes[0, 0], "round", "communication rounds"),
        (axes[0, 1], "local_iterations", "local iterations (rounds x K)"),
        (axes[1, 0], "bytes", "bytes communicated, up + down (log)"),
    ]
    floor = 1e-12 * max(1.0, abs(fstar)) if math.isfinite(fstar) else 1e-12
    handles = []
    for alg in algorithm_order(curves["algorithm"].unique()):
        c = curves[curves["algorithm"] == alg].sort_values("round")
        col, band = colour(alg), c["n"].max() > 1
        for ax, x, _ in panels:
            cc = c[c[x] > 0] if x == "bytes" else c
            (line,) = ax.plot(cc[x], cc["mean"], color=col, lw=1.6)
            if band:
                ax.fill_between(cc[x], cc["min"], cc["max"], color=col, alpha=0.2, lw=0)
        gap = {k: (c[k] - fstar).clip(lower=floor) for k in ("mean", "min", "max")}
        axes[1, 1].plot(c["round"], gap["mean"], color=col, lw=1.6)
        if band:
            axes[1, 1].fill_between(c["round"], gap["min"], gap["max"], color=col, alpha=0.2, lw=0)
        seeds = int(c["n"].max())
        handles.append(
            (line, f"{label(alg)}: {configs.get(alg, '')} ({seeds} seed{'s' if seeds > 1 else ''})")
        )
    for ax, _, xlabel in panels:
        ax.set_xlabel(xlabel)
        ax.set_ylabel("objective f(x)")
        log_if_useful(ax, pd.concat([curves["min"], curves["max"]]))
        ax.grid(alpha=0.3)
    axes[1, 0].set_xscale("log")
    axes[1, 1].set_yscale("log")
    gaps = (curves["mean"] - fstar)[lambda g: g > floor]
    if len(gaps):  # the band's minimum touches f* (clipped): do not let it squash the axis
        axes[1, 1].set_ylim(bottom=max(floor, float(gaps.min()) / 5))
    axes[1, 1].set_xlabel("communication rounds")
    # f̂ is the lowest objective any run reached, not the optimum: a curve still falling when
    # it reaches f̂ drops to the clip there, which is the estimate's artefact, not convergence
    axes[1, 1].set_ylabel(f"f(x) - f̂   (f̂ = {fstar:.6g}, lowest of any run)")
    axes[1, 1].grid(alpha=0.3, which="both")
    fig.legend(
        [h for h, _ in handles],
        [t for _, t in handles],
        loc="lower center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=1 if len(handles) <= 3 else 2,
        fontsize=9,
        frameon=False,
    )
    fig.suptitle(
        f"{title}: best configuration per algorithm (mean over seeds, band = min-max)", fontsize=11
    )
    return fig
