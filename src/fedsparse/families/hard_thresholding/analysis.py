"""The hard-thresholding family's analysis, on top of the generic one
(``report.analysis``): rounds to reach Distributed-IHT's objective against the papers' claimed
speed-ups, the verdicts at the papers' step-size grid and with Distributed-IHT held at the step
flwr PR #7076 reports, the final objective over step size and local steps, and the effect of
the non-IID level. ``report.py`` writes them into the family's page.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ...report import analysis
from ...report.claims import AGREES, DISAGREES, NO_CLAIM, NOT_MEASURED
from ...report.data import ReportData

BASELINE = "distiht"  # the papers' reference: speed-ups are counted against it
HEATMAP_ALGORITHMS = ("fedht", "fediterht")

# The papers' headline claims (spec section 7): speed-up in rounds over Distributed-IHT.
# Keyed by (synthetic task, loss): (name, R, the (alpha, beta) the papers state it at,
# {algorithm: claimed ratio}). A data set at another (alpha, beta) gets no verdict on it.
CLAIMS = {
    ("linear", "least_squares"): (
        "Simulation I",
        100,
        (0.1, 0.1),
        {"fedht": 1.7, "fediterht": 5.0},
    ),
    ("logistic", "logistic"): ("Simulation II", 200, (1.0, 1.0), {"fediterht": 4.0}),
}
AGREE_FACTOR = 1.5
# The papers' step-size grid (spec section 6). A sweep that searched more step sizes gets its
# verdicts twice, at the papers' grid and at its own (grid_sensitivity).
PAPER_STEPSIZES = (10.0, 1.0, 0.6, 0.3, 0.1, 0.06, 0.03, 0.01, 0.001)
# Each client's curvature caps the federated methods' step while Distributed-IHT sees only the
# global one, so the verdict hinges on Distributed-IHT's step: claims are also scored with it
# held at the step flwr PR #7076 reports for it (K = 1, lr 0.01), when the sweep ran it there.
HELD_STEP = 0.01
# A target Distributed-IHT is within 1 % of by round R/20 (5 of 100, 10 of 200) is its plateau
# (Simulation II read Flower's way: the base-rate loss); reaching it early measures the first
# steps, not the papers' speed-up over R rounds, so it is scored as not comparable.
TRIVIAL_TOL, TRIVIAL_SHARE = 0.01, 0.05


def rounds_to_target(a: analysis.Analysis) -> tuple[pd.DataFrame, dict[str, str]]:
    """Table 2, and a note per section where it cannot be computed."""
    rows, notes, base_name = [], {}, analysis.label(BASELINE)
    for sec in a.sections.itertuples():
        algs = a.best[a.best["section"] == sec.section].set_index("algorithm")
        if BASELINE not in algs.index:
            ran = (a.runs["section"] == sec.section) & (a.runs["algorithm"] == BASELINE)
            notes[sec.section] = (
                f"No rounds-to-target table: every {base_name} configuration diverged."
                if ran.any()
                else f"No rounds-to-target table: {base_name} was not run on this data set."
            )
            continue
        curves = a.curves[a.curves["section"] == sec.section]
        base = curves[curves["algorithm"] == BASELINE]
        if base.empty:
            notes[sec.section] = f"No rounds-to-target table: no {base_name} trace found."
            continue
        claim = _claim(sec)
        r_nominal = 200 if sec.loss == "logistic" else 100
        r = int(min(r_nominal, base["round"].max()))
        target_row = base[base["round"] <= r].iloc[-1]
        target = float(target_row["mean"])
        plateau = trivial_round(base, r, target)
        for alg in analysis.algorithm_order(algs.index):
            c = curves[curves["algorithm"] == alg]
            if c.empty:  # a best configuration whose traces are missing
                continue
            hit = c.loc[c["mean"] <= target, "round"]
            first = int(hit.min()) if len(hit) else None
            ratio = (r / first if first else math.inf) if first is not None else math.nan
            claimed = claim[3].get(alg) if claim else None
            agreement, text = _verdict(alg, r, first, ratio, claim, claimed, int(c["round"].max()))
            if agreement in (AGREES, DISAGREES) and plateau is not None:
                agreement = NOT_MEASURED
                text = text.rsplit(". We", 1)[0] + ". " + trivial_text(r, plateau)
            if agreement in (AGREES, DISAGREES) and not at_papers_setting(sec, claim):
                agreement = NO_CLAIM
                text = (
                    text.rsplit(". We", 1)[0] + f". The papers state this at {setting_text(claim)}"
                    f" only: no claim at (α, β) = ({sec.alpha:g}, {sec.beta:g})."
                )
            rows.append(
                {
                    "section": sec.section,
                    "algorithm": alg,
                    "best_config": algs.loc[alg, "config"],
                    "R": r,
                    "target": target,
                    "rounds_to_target": first,
                    "reached": first is not None,
                    "ratio": ratio,
                    "trivial": plateau is not None,
                    "claim_source": claim[0] if claim else None,
                    "claimed_ratio": claimed,
                    "agreement": agreement,
                    "verdict": text + _edge_caveat(a, sec.section, alg),
                }
            )
    table = pd.DataFrame(
        rows,
        columns=[
            "section",
            "algorithm",
            "best_config",
            "R",
            "target",
            "rounds_to_target",
            "reached",
            "ratio",
            "trivial",
            "claim_source",
            "claimed_ratio",
            "agreement",
            "verdict",
        ],
    )
    table["rounds_to_target"] = table["rounds_to_target"].astype("Int64")
    table["trivial"] = table["trivial"].astype(bool)
    table["claimed_ratio"] = table["claimed_ratio"].astype(float)
    return table, notes


def trivial_round(base: pd.DataFrame, r: int, target: float) -> int | None:
    """The round (R/20, at least 1) by which Distributed-IHT's mean curve ``base`` is already
    within TRIVIAL_TOL of its round-``r`` value ``target``, or None: the target is not trivial."""
    check = max(1, math.ceil(r * TRIVIAL_SHARE))
    early = base.loc[base["round"] <= check, "mean"]
    if early.empty or not math.isfinite(target):
        return None
    return check if early.min() <= target + TRIVIAL_TOL * abs(target) else None


def trivial_text(r: int, check: int) -> str:
    return (
        f"Not comparable: the target is trivial (Distributed-IHT is within "
        f"{TRIVIAL_TOL:.0%} of its round-{r} objective by round {check}, a plateau reached "
        "early; how soon a method gets there measures its first steps, not the papers' "
        f"speed-up over {r} rounds)."
    )


def with_baseline(
    a: analysis.Analysis, b: analysis.Analysis, edges: bool = True
) -> analysis.Analysis:
    """``a`` with Distributed-IHT's best configuration and curves taken from ``b`` (an analysis
    of fewer step sizes), the other algorithms' kept; without ``edges``, Distributed-IHT's grid
    edges are dropped (a step held on purpose is no edge to extend)."""
    base = b.best[b.best["algorithm"] == BASELINE]
    if not edges:
        base = base.assign(grid_edges="")
    best = pd.concat([a.best[a.best["algorithm"] != BASELINE], base], ignore_index=True)
    curves = pd.concat(
        [a.curves[a.curves["algorithm"] != BASELINE], b.curves[b.curves["algorithm"] == BASELINE]],
        ignore_index=True,
    )
    return analysis.Analysis(a.runs, a.sections, a.configs, best, curves, a.fstar, a.data)


def _edge_caveat(a: analysis.Analysis, section: str, algorithm: str) -> str:
    """A verdict drawn from a best configuration at the edge of its grid is provisional."""
    note = analysis.edge_note(a, section, algorithm)
    if not note:
        return ""
    return f" Provisional: in {analysis.label(algorithm)}'s best configuration, {note}."


def _claim(sec) -> tuple | None:
    if sec.kind != "synthetic":
        return None
    return CLAIMS.get((sec.task, sec.loss))


def setting_text(claim: tuple) -> str:
    """'Simulation I, (α, β) = (0.1, 0.1)': where the papers state a claim."""
    return f"{claim[0]}, (α, β) = ({claim[2][0]:g}, {claim[2][1]:g})"


def at_papers_setting(sec, claim: tuple | None) -> bool:
    """Whether a synthetic data set is at the (alpha, beta) the papers state ``claim`` at."""
    if claim is None or pd.isna(sec.alpha) or pd.isna(sec.beta):
        return False
    return math.isclose(sec.alpha, claim[2][0]) and math.isclose(sec.beta, claim[2][1])


def _verdict(alg, r, first, ratio, claim, claimed, last_round) -> tuple[str, str]:
    """(agreement, sentence): agreement is "agrees", "does not agree", "not measured here" (no
    claim to check, or a trivial target), or "" for the reference itself."""
    name = analysis.label(alg)
    if alg == BASELINE:
        text = f"{name} is the reference: the target is its mean objective at round {r}"
        if first is not None and first < r:
            # the mean over seeds of a stochastic curve is not monotone
            text += (
                f"; its mean curve is not monotone and already dips to that value at round "
                f"{first}, so its own ratio above 1 is that noise, not a speed-up"
            )
        return "", text + "."
    if first is None:
        ours = f"{name} does not reach the target within its {last_round} rounds"
    elif first == 0:
        ours = f"{name} is already at the target at round 0"
    else:
        how = "fewer" if ratio >= 1 else "more"
        factor = ratio if ratio >= 1 else 1 / ratio
        ours = (
            f"{name} reaches the target at round {first}, i.e. {factor:.2g}x {how} rounds "
            f"than {analysis.label(BASELINE)} ({r})"
        )
    if claim is None:
        return NOT_MEASURED, ours + "; the papers make no numeric claim for this data set."
    if claimed is None:
        return NOT_MEASURED, ours + f"; the papers make no claim for {name} in {claim[0]}."
    said = f"the papers claim ≈{claimed:g}x fewer ({setting_text(claim)})"
    if first is None:
        return DISAGREES, f"{ours}; {said}. We do not agree."
    if first == 0:
        return NOT_MEASURED, f"{ours}; {said}. Not comparable (the target is trivial)."
    rel = ratio / claimed
    if ratio < 1:
        return DISAGREES, f"{ours}; {said}. We do not agree: the direction is opposite."
    if 1 / AGREE_FACTOR <= rel <= AGREE_FACTOR:
        side = "larger" if rel > 1 else "smaller"
        return AGREES, (
            f"{ours}; {said}. We agree (same direction, our speed-up is {rel:.2g}x the "
            f"claimed one, slightly {side}; within a factor {AGREE_FACTOR:g})."
        )
    side = "larger" if rel > 1 else "smaller"
    return DISAGREES, (
        f"{ours}; {said}. We do not agree on the size: same direction, but our speed-up "
        f"is {rel:.2g}x the claimed one ({side}, beyond a factor {AGREE_FACTOR:g})."
    )


def grid_sensitivity(
    source: ReportData | str | Path, a: analysis.Analysis, r2t: pd.DataFrame
) -> pd.DataFrame:
    """The rounds-to-target verdicts at the papers' step sizes next to those at all the step
    sizes searched; empty unless the sweep searched the papers' grid and more (a verdict drawn
    at the edge of the papers' grid may not survive a finer one)."""
    cols = ["section", "algorithm", "grid", "best_config", "rounds_to_target"]
    cols += ["agreement", "verdict"]
    steps = a.runs["stepsize"] if "stepsize" in a.runs else pd.Series(dtype=float)
    searched = set(steps.dropna().astype(float))
    papers = searched & set(PAPER_STEPSIZES)
    if r2t.empty or not papers or papers == searched:
        return pd.DataFrame(columns=cols)
    small = analysis.analyse(source, papers)
    theirs, notes = rounds_to_target(small)
    keys = ["section", "algorithm"]
    missing = r2t[keys].merge(theirs[keys], how="left", indicator=True)
    lost = [
        _missing_verdict(small, notes, row.section, row.algorithm)
        for row in missing[missing["_merge"] == "left_only"].itertuples()
    ]
    lost = [row for row in lost if row is not None]
    if lost:  # say why a verdict at the papers' grid is missing rather than drop the row
        theirs = pd.concat([theirs, pd.DataFrame(lost)], ignore_index=True)
    label_ours = f"ours ({len(searched)} step sizes, {min(searched):g} to {max(searched):g})"
    label_theirs = f"papers' ({len(papers)} step sizes, {min(papers):g} to {max(papers):g})"
    both = pd.concat(
        [theirs.assign(grid=label_theirs, _k=0), r2t.assign(grid=label_ours, _k=1)],
        ignore_index=True,
    )
    rank = {alg: i for i, alg in enumerate(analysis.algorithm_order(both["algorithm"].unique()))}
    both = both.sort_values(
        ["section", "algorithm", "_k"],
        key=lambda s: s.map(rank) if s.name == "algorithm" else s,
        kind="stable",
    )
    return both[cols].reset_index(drop=True)


def _missing_verdict(
    a: analysis.Analysis, notes: dict, section: str, algorithm: str
) -> dict | None:
    """The row of an algorithm that has no rounds-to-target verdict in analysis ``a``: every
    configuration diverged, or the section has no target (its note), or None."""
    mine = a.configs[(a.configs["section"] == section) & (a.configs["algorithm"] == algorithm)]
    row = {"section": section, "algorithm": algorithm, "agreement": ""}
    if len(mine) and not mine["valid"].any():
        verdict = "every configuration at these step sizes diverged: no verdict"
        return {**row, "best_config": "all configurations diverged", "verdict": verdict}
    if section in notes:
        best = a.best[(a.best["section"] == section) & (a.best["algorithm"] == algorithm)]
        config = best["config"].iloc[0] if len(best) else ""
        return {**row, "best_config": config, "verdict": notes[section]}
    return None


def heatmap_table(a: analysis.Analysis) -> pd.DataFrame:
    """Best (over other hyperparameters) mean final objective per step size x local steps."""
    cfg = a.configs[a.configs["algorithm"].isin(HEATMAP_ALGORITHMS)]
    cfg = cfg.assign(_val=cfg["mean_final"].where(cfg["valid"]))
    cells = (
        cfg.groupby(["section", "algorithm", "stepsize", "local_steps"], dropna=False)
        .agg(
            best_final=("_val", "min"),
            configs=("valid", "size"),
            valid_configs=("valid", "sum"),
            diverged_runs=("diverged", "sum"),
        )
        .reset_index()
    )
    cells["cell"] = np.where(
        cells["valid_configs"] > 0,
        cells["best_final"].map(lambda v: f"{v:.3g}"),
        np.where(cells["diverged_runs"] > 0, "div", "n/a"),
    )
    return analysis.sort_by_algorithm(cells)


def noniid_table(a: analysis.Analysis, sections: set[str] | None = None) -> pd.DataFrame:
    """Synthetic data sets read as the papers do (``sections``; by default those not centred):
    each algorithm's best final objective against (alpha, beta)."""
    if sections is None:
        keep = a.sections["center"] == "none"
    else:
        keep = a.sections["section"].isin(sections)
    sec = a.sections[(a.sections["kind"] == "synthetic") & keep]
    sec = sec[sec["alpha"].notna() & sec["beta"].notna()]
    if sec.empty:
        return pd.DataFrame(columns=["task", "loss", "section", "alpha", "beta"])
    wide = a.best.pivot_table(index="section", columns="algorithm", values="mean_final")
    wide = wide[[c for c in analysis.algorithm_order(wide.columns)]]
    out = sec[["task", "loss", "section", "alpha", "beta"]].merge(
        wide, left_on="section", right_index=True, how="left"
    )
    return out.sort_values(["task", "loss", "alpha", "beta", "section"]).reset_index(drop=True)


def readings_table(
    a: analysis.Analysis,
    r2t: pd.DataFrame,
    reading: dict[str, str],
    order: list[str],
    held: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Simulation data sets run under several readings (``reading``: section -> reading name,
    ``order``: the readings' order, the papers' first): per reading and algorithm, the level
    reached (best mean final objective) and the rounds-to-target verdict, so a reading that
    speeds the methods up but stalls them higher shows as such. Empty unless some (task, loss,
    alpha, beta) was run with two readings or more. ``held``: the rounds-to-target table with
    Distributed-IHT held at HELD_STEP, whose rounds and verdicts become ``*_held`` columns."""
    cols = ["task", "loss", "alpha", "beta", "reading", "algorithm", "best_config"]
    cols += ["final_objective", "rounds_to_target", "ratio", "trivial", "claimed_ratio"]
    cols += ["agreement"]
    if held is not None:
        cols += ["rounds_to_target_held", "agreement_held"]
    sec = a.sections[a.sections["kind"] == "synthetic"]
    sec = sec.assign(reading=sec["section"].map(reading))
    keys = ["task", "loss", "alpha", "beta"]
    several = sec.groupby(keys, dropna=False)["reading"].transform("nunique") > 1
    sec = sec[several]
    if sec.empty:
        return pd.DataFrame(columns=cols)
    best = a.best[["section", "algorithm", "config", "mean_final"]]  # hyperparameters may be
    best = best.rename(columns={"config": "best_config", "mean_final": "final_objective"})
    out = sec[[*keys, "reading", "section"]].merge(best, on="section")  # named alpha, beta
    verdicts = ["section", "algorithm", "rounds_to_target", "ratio", "trivial", "claimed_ratio"]
    out = out.merge(r2t[[*verdicts, "agreement"]], on=["section", "algorithm"], how="left")
    if held is not None:
        h = held[["section", "algorithm", "rounds_to_target", "agreement"]]
        h = h.rename(columns={"rounds_to_target": "rounds_to_target_held"})
        h = h.rename(columns={"agreement": "agreement_held"})
        out = out.merge(h, on=["section", "algorithm"], how="left")
    rank = {alg: i for i, alg in enumerate(analysis.algorithm_order(out["algorithm"].unique()))}
    rank_r = {name: i for i, name in enumerate(order)}
    out = out.assign(_c=out["reading"].map(rank_r), _a=out["algorithm"].map(rank))
    return out.sort_values([*keys, "_c", "_a"])[cols].reset_index(drop=True)
