"""The SSCA page's figures: training cost or test accuracy against rounds per batch size (SSCA
against SGD), Algorithm 2's cost against its limit U and its slack, and the trade-off curves of
both algorithms. Each takes the means ``analysis.analyse`` returns and gives a matplotlib figure,
or None when there is nothing to draw."""

from __future__ import annotations

import pandas as pd

from ...report.figures import plt


def curves_figure(ssca: pd.DataFrame | None, sgd: pd.DataFrame | None, column: str, title: str):
    """SSCA per batch size against SGD at the same B (E = 1) and at the equal-work (B, E).

    Parameters
    ----------
    ssca, sgd
        Mean curves per round (``analyse``'s ``ssca_curves``: per ``batch_size``;
        ``sgd_curves``: per ``batch_size`` and ``local_steps``); None without runs.
    column
        The curve drawn: ``train_loss`` or ``test_accuracy``.
    title
        The figure's title.

    Returns
    -------
    matplotlib.figure.Figure or None
        None without SSCA curves.
    """
    if ssca is None:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    cmap = plt.get_cmap("viridis")
    batches = sorted(set(ssca["batch_size"].dropna().astype(int)))
    for k, b in enumerate(batches):
        c = cmap(k / max(1, len(batches) - 1) * 0.85)
        s = ssca[ssca["batch_size"] == b]
        ax.plot(s["round"], s[column], color=c, lw=2, label=f"SSCA B={b}")
        if sgd is not None:
            g = sgd[(sgd["batch_size"] == b) & (sgd["local_steps"] == 1)]
            if len(g):
                ax.plot(g["round"], g[column], color=c, ls="--", label=f"SGD B={b}, E=1")
    if sgd is not None:
        for bb, e, ls in ((5, 2, ":"), (50, 2, "-.")):
            g = sgd[(sgd["batch_size"] == bb) & (sgd["local_steps"] == e)]
            if len(g):
                ax.plot(g["round"], g[column], color="grey", ls=ls, label=f"SGD B={bb}, E={e}")
    ax.set_xlabel("round t")
    ax.set_ylabel(column.replace("_", " "))
    ax.set_title(title)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    return fig


def alg2_figure(curves: pd.DataFrame, title: str):
    """Algorithm 2's training cost F(w_t) against its limit U, and its slack, per (B, U).

    Parameters
    ----------
    curves
        ``analyse``'s ``alg2_curves``: means per ``cost_limit``, ``batch_size`` and round of
        ``constraint_value`` (F - U) and ``slack``.
    title
        The figure's title.

    Returns
    -------
    matplotlib.figure.Figure or None
        None without curves.
    """
    if not len(curves):
        return None
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    curves = curves.sort_values(["batch_size", "cost_limit", "round"])
    for k, ((b, U), s) in enumerate(curves.groupby(["batch_size", "cost_limit"])):
        c = plt.get_cmap("tab10")(k % 10)
        ax1.plot(s["round"], s["constraint_value"] + U, color=c, label=f"B={int(b)}, U={U:g}")
        ax1.axhline(U, color=c, ls=":", lw=1)
        ax2.plot(s["round"], s["slack"], color=c, label=f"B={int(b)}, U={U:g}")
    ax1.set_xlabel("round t")
    ax1.set_ylabel("F(w_t) (dotted: U)")
    ax2.set_xlabel("round t")
    ax2.set_ylabel("slack s_t")
    ax2.set_yscale("symlog", linthresh=1e-6)
    ax1.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def tradeoff_figure(tradeoff: tuple[pd.DataFrame, pd.DataFrame], title: str):
    """Fig. 3's trade-off: ||w_T||^2 against the training cost F(w_T), Algorithm 1 over λ and
    Algorithm 2 over U.

    Parameters
    ----------
    tradeoff
        ``analyse``'s ``tradeoff``: the final means of Algorithm 1 (per ``lambda``) and of
        Algorithm 2 (per ``cost_limit``), each sorted by ``train_loss``.
    title
        The figure's title.

    Returns
    -------
    matplotlib.figure.Figure or None
        None when neither algorithm has points.
    """
    t1, t2 = tradeoff
    if not len(t1) and not len(t2):
        return None
    fig, ax = plt.subplots(figsize=(6, 4.2))
    if len(t1):
        ax.plot(t1["train_loss"], t1["sq_norm"], "o-", label="Algorithm 1 (over lambda)")
    if len(t2):
        ax.plot(t2["train_loss"], t2["sq_norm"], "s-", label="Algorithm 2 (over U)")
    ax.set_xlabel("training cost F(w_T)")
    ax.set_ylabel("||w_T||^2")
    ax.set_yscale("log")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
