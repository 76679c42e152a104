"""The report's section for mini-batch SSCA (seed 004) and its SGD baseline: the paper's §6
claims checked on our numbers, training cost and test accuracy against rounds per batch size,
Algorithm 2's cost against U and its slack, and the trade-off curves of both algorithms.

Built from the traces only (``ssca``, ``ssca_constrained`` and ``fedavg`` rows), per data set.
"The paper's" SSCA runs are those with its constants (tau = 0.1, gamma_extra = 0.05, the
(a1, a2, alpha) of each B from its table; Algorithm 1 at lambda = 1e-5); SGD at each (B, E) is
its best (stepsize, stepsize_decay) by mean final training cost, as the paper chose a-bar and
alpha-bar by grid search. "Faster convergence" is read as a lower mean final training cost
after the same number of rounds (communication rounds, the paper's measure).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..results import read_results, to_frame
from .analysis import slugify
from .figures import plt

TABLE = {1: (0.4, 0.4, 0.4), 10: (0.6, 0.9, 0.3), 100: (0.9, 0.9, 0.3)}  # B: (a1, a2, alpha)
LAMBDA = 1e-5
SETTLED = 0.02  # |F(w_T) - U| below this (and slack ~ 0): the cost settled at U
COLUMNS = (
    "run_id, dataset, algorithm, seed, round, batch_size, local_steps, stepsize, stepsize_decay, "
    'prox_weight, rho_scale, gamma_scale, decay, gamma_extra, "lambda", cost_limit, penalty, '
    "train_loss, test_accuracy, sq_norm, slack, constraint_value"
)


def ssca_traces(results_dir: str | Path) -> pd.DataFrame:
    """The trace rows of ssca, ssca_constrained and fedavg runs that ended ok."""
    sql = (
        f"SELECT {COLUMNS} FROM traces WHERE algorithm IN ('ssca', 'ssca_constrained', 'fedavg') "
        "AND run_id IN (SELECT run_id FROM runs WHERE status = 'ok')"
    )
    return to_frame(read_results([results_dir], sql))


def _paper_schedule(df: pd.DataFrame) -> pd.Series:
    ok = (df["prox_weight"] == 0.1) & (df["gamma_extra"] == 0.05)
    table = pd.Series(False, index=df.index)
    for b, (a1, a2, alpha) in TABLE.items():
        table |= (
            (df["batch_size"] == b)
            & (df["rho_scale"] == a1)
            & (df["gamma_scale"] == a2)
            & (df["decay"] == alpha)
        )
    return (ok & table).fillna(False).astype(bool)


def _mean_curves(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    return (
        df.groupby([*keys, "round"], dropna=False)[["train_loss", "test_accuracy"]]
        .mean()
        .reset_index()
    )


def _final(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    last = df[df["round"] == df.groupby("run_id")["round"].transform("max")]  # each run's last
    cols = ["train_loss", "test_accuracy", "sq_norm", "slack", "constraint_value"]
    out = last.groupby(keys, dropna=False)[cols].mean()
    out["runs"] = last.groupby(keys, dropna=False)["seed"].nunique()
    return out.reset_index()


def analyse(df: pd.DataFrame) -> dict:
    """Per data set: the curves, final values and claims of one data set's rows."""
    ssca = df[(df["algorithm"] == "ssca") & _paper_schedule(df) & (df["lambda"] == LAMBDA)]
    alg2 = df[(df["algorithm"] == "ssca_constrained") & _paper_schedule(df)]
    sgd = df[df["algorithm"] == "fedavg"]
    out: dict = {"claims": []}
    ssca_final = _final(ssca, ["batch_size"]) if len(ssca) else pd.DataFrame()
    sgd_final = pd.DataFrame()
    if len(sgd):
        per = _final(sgd, ["batch_size", "local_steps", "stepsize", "stepsize_decay"])
        best = per.loc[per.groupby(["batch_size", "local_steps"])["train_loss"].idxmin()]
        sgd_final = best.reset_index(drop=True)
        keys = ["batch_size", "local_steps", "stepsize", "stepsize_decay"]
        sgd = sgd.merge(best[keys], on=keys)
    out["ssca_final"], out["sgd_final"] = ssca_final, sgd_final
    out["ssca_curves"] = _mean_curves(ssca, ["batch_size"]) if len(ssca) else None
    out["sgd_curves"] = _mean_curves(sgd, ["batch_size", "local_steps"]) if len(sgd) else None
    claims = out["claims"]

    def cost(frame, **where):
        sel = frame
        for k, v in where.items():
            sel = sel[sel[k] == v]
        return float(sel["train_loss"].iloc[0]) if len(sel) else None

    bs = sorted(ssca_final["batch_size"].dropna().astype(int)) if len(ssca_final) else []
    if len(bs) >= 2:
        costs = [cost(ssca_final, batch_size=b) for b in bs]
        ok = all(a > b for a, b in zip(costs, costs[1:], strict=False))
        claims.append(
            (
                "Algorithm 1: larger B converges faster",
                ", ".join(f"B={b}: F={c:.4f}" for b, c in zip(bs, costs, strict=True)),
                "holds" if ok else "does not hold",
            )
        )
    if len(sgd_final):
        for b in bs:
            s, g = cost(ssca_final, batch_size=b), cost(sgd_final, batch_size=b, local_steps=1)
            if g is not None:
                claims.append(
                    (
                        f"Algorithm 1 faster than SGD at equal B = {b} (E = 1)",
                        f"SSCA F={s:.4f}, best SGD F={g:.4f}",
                        "holds" if s < g else "does not hold",
                    )
                )
        for b, (bb, e) in ((10, (5, 2)), (100, (50, 2))):
            s, g = cost(ssca_final, batch_size=b), cost(sgd_final, batch_size=bb, local_steps=e)
            if s is not None and g is not None:
                claims.append(
                    (
                        f"Algorithm 1 at B = {b} faster than SGD at (B, E) = ({bb}, {e}) "
                        "(equal per-client computation)",
                        f"SSCA F={s:.4f}, best SGD F={g:.4f}",
                        "holds" if s < g else "does not hold",
                    )
                )
    alg2_final = _final(alg2, ["batch_size", "cost_limit"]) if len(alg2) else pd.DataFrame()
    out["alg2_final"] = alg2_final
    out["alg2"] = alg2
    for r in alg2_final.itertuples():
        F = r.constraint_value + r.cost_limit
        settled = abs(r.constraint_value) <= SETTLED and r.slack <= 1e-6
        claims.append(
            (
                f"Algorithm 2 (B = {int(r.batch_size)}, U = {r.cost_limit:g}): F(w_T) settles at U",
                f"F(w_T)={F:.4f}, slack s_T={r.slack:.3g}, ||w_T||^2={r.sq_norm:.4g}",
                "holds" if settled else "does not hold",
            )
        )
    # trade-off curves: Algorithm 1 over lambda, Algorithm 2 over U, at B = 100
    a1 = df[(df["algorithm"] == "ssca") & _paper_schedule(df) & (df["batch_size"] == 100)]
    a2 = alg2[alg2["batch_size"] == 100]
    t1 = _final(a1, ["lambda"]).sort_values("train_loss") if len(a1) else pd.DataFrame()
    t2 = _final(a2, ["cost_limit"]).sort_values("train_loss") if len(a2) else pd.DataFrame()
    out["tradeoff"] = (t1, t2)
    if len(t1) >= 2 and len(t2):
        lo, hi = t1["train_loss"].min(), t1["train_loss"].max()
        inside = t2[(t2["train_loss"] >= lo) & (t2["train_loss"] <= hi)]
        if len(inside):
            curve = np.interp(inside["train_loss"], t1["train_loss"], t1["sq_norm"])
            better = int((inside["sq_norm"].to_numpy() < curve).sum())
            claims.append(
                (
                    "Algorithm 2's trade-off better than Algorithm 1's (smaller ||w||^2 at the "
                    "same training cost)",
                    f"{better} of {len(inside)} Algorithm-2 points below Algorithm 1's curve",
                    "holds" if better == len(inside) else "does not hold",
                )
            )
        else:
            claims.append(
                (
                    "Algorithm 2's trade-off better than Algorithm 1's",
                    "the two curves' training costs do not overlap",
                    "not testable here",
                )
            )
    return out


def _curves_figure(res: dict, column: str, title: str):
    sc, gc = res["ssca_curves"], res["sgd_curves"]
    if sc is None:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    cmap = plt.get_cmap("viridis")
    batches = sorted(set(sc["batch_size"].dropna().astype(int)))
    for k, b in enumerate(batches):
        c = cmap(k / max(1, len(batches) - 1) * 0.85)
        s = sc[sc["batch_size"] == b]
        ax.plot(s["round"], s[column], color=c, lw=2, label=f"SSCA B={b}")
        if gc is not None:
            g = gc[(gc["batch_size"] == b) & (gc["local_steps"] == 1)]
            if len(g):
                ax.plot(g["round"], g[column], color=c, ls="--", label=f"SGD B={b}, E=1")
    if gc is not None:
        for bb, e, ls in ((5, 2, ":"), (50, 2, "-.")):
            g = gc[(gc["batch_size"] == bb) & (gc["local_steps"] == e)]
            if len(g):
                ax.plot(g["round"], g[column], color="grey", ls=ls, label=f"SGD B={bb}, E={e}")
    ax.set_xlabel("round t")
    ax.set_ylabel(column.replace("_", " "))
    ax.set_title(title)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    return fig


def _alg2_figure(res: dict, title: str):
    alg2 = res["alg2"]
    if not len(alg2):
        return None
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    g = alg2.groupby(["batch_size", "cost_limit", "round"])[["constraint_value", "slack"]].mean()
    for k, ((b, U), s) in enumerate(g.groupby(level=[0, 1])):
        s = s.reset_index()
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


def _tradeoff_figure(res: dict, title: str):
    t1, t2 = res["tradeoff"]
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


def add_section(page, results_dir: str | Path, tables: Path) -> None:
    """The SSCA section of the report; nothing when the results hold no SSCA runs."""
    df = ssca_traces(results_dir)
    if not df["algorithm"].isin(["ssca", "ssca_constrained"]).any():
        return
    page.add('<h2 id="ssca">Mini-batch SSCA (seed 004) against SGD</h2>')
    page.text("p", __doc__.split("\n\n", 1)[1].replace("\n", " "), cls="muted")
    all_claims = []
    for dataset, rows in df.groupby("dataset", sort=True):
        res = analyse(rows)
        slug = slugify(dataset)
        page.add(f"<h3>{dataset}</h3>")
        if res["claims"]:
            claims = pd.DataFrame(res["claims"], columns=["claim (paper §6)", "ours", "verdict"])
            page.table(claims)
            all_claims.append(claims.assign(dataset=dataset))
        for name, frame in (("ssca_final", res["ssca_final"]), ("sgd_final", res["sgd_final"])):
            if len(frame):
                page.text("p", "SSCA, final round" if name == "ssca_final" else
                          "SGD (fedavg), best step size per (B, E), final round")  # fmt: skip
                page.table(frame.dropna(axis=1, how="all"))
        for column, what in (("train_loss", "training cost"), ("test_accuracy", "test accuracy")):
            page.figure(
                _curves_figure(res, column, f"{dataset}: {what}, SSCA (λ = 1e-5) vs SGD"),
                f"ssca-{slug}-{column}",
                what,
            )
        page.figure(_alg2_figure(res, f"{dataset}: Algorithm 2"), f"ssca-{slug}-alg2", "alg2")
        page.figure(
            _tradeoff_figure(res, f"{dataset}: trade-off at B = 100"),
            f"ssca-{slug}-tradeoff",
            "trade-off",
        )
    if all_claims:
        pd.concat(all_claims).to_csv(tables / "ssca_claims.csv", index=False)
