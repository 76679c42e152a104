"""The gradient-sparsification page's figures: loss and accuracy against normalised time of
each method's best configuration, the k_m trajectories per exchange time, and FAB-top-k's and
FUB-top-k's fairness view against rounds. Each takes frames of ``analysis`` and returns a
matplotlib figure, or None when there is nothing to draw."""

from __future__ import annotations

import pandas as pd

from ...report.figures import plt
from .analysis import FAB, FUB


def curves_figure(rows: pd.DataFrame, best: pd.DataFrame, budget: float, title: str):
    """Loss and accuracy against time of each best configuration, mean over its runs' rows.

    Parameters
    ----------
    rows
        :meth:`analysis.GsTraces.rows` of the best configurations' runs.
    best
        The best configurations (:func:`analysis.best_configs`), a line each.
    budget
        The comparison's time budget: a dotted line, and the x-axis to 1.5 times it.
    title
        The figure's title.
    """
    if best.empty:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for k, b in enumerate(best.itertuples()):
        mine = rows[rows["run_id"].isin(b.runs)]
        c = mine.groupby("round")[["time", "loss", "accuracy"]].mean().reset_index()
        colour = plt.get_cmap("tab10")(k % 10)
        axes[0].plot(c["time"], c["loss"], color=colour, label=b.method)
        axes[1].plot(c["time"], c["accuracy"], color=colour, label=b.method)
    for ax, what in zip(axes, ("training loss", "test accuracy"), strict=True):
        ax.axvline(budget, color="grey", ls=":", lw=1)
        ax.set_xlabel("normalised time (dotted: the budget)")
        ax.set_ylabel(what)
        ax.set_xlim(0, 1.5 * budget)
    axes[0].set_yscale("log")
    axes[0].legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def k_figure(rows: pd.DataFrame, title: str):
    """k_m against rounds, a panel per beta and a line per method.

    Parameters
    ----------
    rows
        :func:`analysis.k_runs`.
    title
        The figure's title.
    """
    if rows.empty:
        return None
    betas = sorted(rows["exchange_time"].unique())
    fig, axes = plt.subplots(1, len(betas), figsize=(4.2 * len(betas), 3.6), squeeze=False)
    for ax, beta in zip(axes[0], betas, strict=True):
        for k, (method, r) in enumerate(rows[rows["exchange_time"] == beta].groupby("method")):
            colour = plt.get_cmap("tab10")(k % 10)
            ax.plot(r["round"], r["k_used"], lw=1, label=method, color=colour)
        ax.set_yscale("log")
        ax.set_title(f"beta = {beta:g}")
        ax.set_xlabel("round m")
        ax.set_ylabel("k_m (k_used)")
        ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def fairness_figure(counts: pd.DataFrame, title: str):
    """FAB-top-k's and FUB-top-k's fairness view against rounds, mean over their runs.

    Parameters
    ----------
    counts
        :meth:`analysis.GsTraces.fairness` of the fixed-k runs.
    title
        The figure's title.
    """
    fixed = counts[counts["method"].isin([FAB, FUB])]
    if fixed.empty:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for method, r in fixed.groupby("method"):
        s = r.groupby("round")[["shared_sum", "shared_n", "idle_sum", "idle_n"]].sum()
        shared = (s["shared_sum"] / s["shared_n"]).astype(float)
        idle = (s["idle_sum"] / s["idle_n"]).astype(float)
        axes[0].plot(s.index, shared, label=method)
        axes[1].plot(s.index, idle, label=method)
    axes[0].set_ylabel("min over clients of |J ∩ J_i|")
    axes[1].set_ylabel("clients with nothing applied")
    for ax in axes:
        ax.set_xlabel("round m")
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return fig
