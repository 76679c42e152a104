"""The sFedHP page's figures: accuracy and training loss against rounds, the sparse run's
density and cumulative bits (Fig. 3), and accuracy against lambda (Fig. 4). Each takes the means
``analysis.py`` computes and returns a matplotlib figure."""

from __future__ import annotations

import re

import pandas as pd

from ...algorithms import ALGORITHMS
from ...report.figures import plt
from .analysis import METHODS, SFEDHP, SPARSE_DENSITY


def method_colour(algorithm: str) -> str:
    """How the page draws an algorithm: a method's declared colour (Algorithm.colour)."""
    return ALGORITHMS[algorithm].colour if algorithm in METHODS else "black"


def _styles(curves: pd.DataFrame):
    """(algorithm, label, colour, line style): configurations of one method differ in style."""
    out = []
    for algo, rows in curves.groupby("algorithm", sort=True):
        for k, lab in enumerate(sorted(rows["label"].unique())):
            out.append((algo, lab, method_colour(algo), ("-", "--", ":", "-.")[k % 4]))
    return out


def _legend(label: str) -> str:
    """A configuration's label without the sparse run's secondary settings (the tables have
    them), so a legend fits beside its panel."""
    short = re.sub(r" (ρ|zero_tol|density_floor|gamma2_rounds|gamma_tiny)=\S+", "", label)
    return short.replace(" γ1=", " sparse, γ1=")  # only a sparse run's label has γ1


def accuracy_figure(curves: pd.DataFrame, title: str):
    """GM and PM test accuracy and the GM training loss against rounds, one line per
    configuration (a method's colour, its configurations told apart by line style).

    Parameters
    ----------
    curves
        Means over seeds per ``algorithm``, ``label`` and round (``analysis.round_means`` of
        ``test_accuracy``, ``pm_test_accuracy`` and ``train_loss``).
    title
        The figure's title.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    panels = (
        ("test_accuracy", "GM test accuracy (%)"),
        ("pm_test_accuracy", "PM test accuracy (%)"),
        ("train_loss", "GM training loss"),
    )
    for ax, (col, name) in zip(axes, panels, strict=True):
        for algo, lab, c, ls in _styles(curves):
            s = curves[(curves["label"] == lab) & (curves["algorithm"] == algo)].dropna(
                subset=[col]
            )
            if len(s):
                ax.plot(s["round"], s[col], color=c, ls=ls, label=_legend(lab))
        ax.set_xlabel("global round t")
        ax.set_ylabel(name)
    axes[2].set_yscale("log")
    axes[0].legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def sparse_figure(curves: pd.DataFrame, title: str):
    """Fig. 3's panels: the density of w (and, for sFedHP, of the clients' models θ) and the
    cumulative Remark-1 bits against rounds; a dotted line at SPARSE_DENSITY.

    Parameters
    ----------
    curves
        Means over seeds per ``algorithm``, ``label`` and round (``analysis.round_means`` of
        ``density``, ``pm_density`` and ``bits``).
    title
        The figure's title.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for algo, lab, c, ls in _styles(curves):
        s = curves[(curves["label"] == lab) & (curves["algorithm"] == algo)]
        if s["density"].notna().any():
            ax1.plot(s["round"], s["density"], color=c, ls=ls, label=f"{_legend(lab)}: w")
        if algo == SFEDHP and s["pm_density"].notna().any():
            ax1.plot(
                s["round"], s["pm_density"], color=c, ls=ls, alpha=0.5, label=f"{_legend(lab)}: θ"
            )
        if s["bits"].notna().any():
            ax2.plot(s["round"], s["bits"], color=c, ls=ls, label=_legend(lab))
    ax1.axhline(SPARSE_DENSITY, color="k", lw=0.8, ls=":")
    ax1.set_ylabel("density (non-zeros / d; dotted: 20 %)")
    ax2.set_ylabel("cumulative bits (one edge or client, up + down)")
    for ax in (ax1, ax2):
        ax.set_xlabel("global round t")
        ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def lambda_figure(curves: pd.DataFrame, table: pd.DataFrame, key, title: str):
    """Fig. 4: sFedHP's GM against rounds for each λ, and its best GM and PM against λ, ours and
    the paper's.

    Parameters
    ----------
    curves
        Means over seeds per ``lambda1`` and round of ``test_accuracy``.
    table
        ``analysis.lambda_table`` without its ``config``: one row per λ.
    key
        The paper's table the data set is shown against (``analysis.paper_table``); None: no
        paper line.
    title
        The figure's title.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    cmap = plt.get_cmap("viridis")
    lams = sorted(table["lambda"])
    for k, lam in enumerate(lams):
        s = curves[curves["lambda1"] == lam]
        ax1.plot(
            s["round"],
            s["test_accuracy"],
            color=cmap(k / max(1, len(lams) - 1) * 0.9),
            label=f"λ = {lam:g}",
        )
    ax1.set_xlabel("global round t")
    ax1.set_ylabel("GM test accuracy (%)")
    ax1.legend(fontsize=8)
    for col, paper_col, c in (
        ("gm_best", "paper GM", "tab:red"),
        ("pm_best", "paper PM", "tab:blue"),
    ):
        ax2.errorbar(
            table["lambda"],
            table[col],
            yerr=table[f"{col}_std"].fillna(0),
            color=c,
            marker="o",
            label=f"ours, {col[:2].upper()}",
        )
        if key is not None:
            paper = table.dropna(subset=[paper_col])
            ax2.plot(
                paper["lambda"],
                paper[paper_col],
                color=c,
                ls="--",
                marker="x",
                label=f"paper, {col[:2].upper()}",
            )
    ax2.set_xlabel("λ = λ1 = λ2")
    ax2.set_ylabel("best test accuracy over rounds (%)")
    ax2.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return fig
