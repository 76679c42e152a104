"""The hard-thresholding family's analysis, on top of the generic one
(``report.analysis``): rounds to reach Distributed-IHT's objective against the papers' claimed
speed-ups, the verdicts at the papers' step-size grid and with Distributed-IHT held at the step
flwr PR #7076 reports, the final objective over step size and local steps, and the effect of
the non-IID level. ``report.py`` writes them into the family's page.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from ...data.defaults import SYNTHETIC_DEFAULTS
from ...report import analysis
from ...report.claims import AGREES, NOT_MEASURED, Claim
from ...report.data import ReportData
from ...report.evidence import Ran, Setting, about, bootstrap_interval, judge

BASELINE = "distiht"  # the papers' reference: speed-ups are counted against it
HEATMAP_ALGORITHMS = ("fedht", "fediterht")


class SpeedUp(NamedTuple):
    """A papers' headline claim (spec section 7): speed-up in rounds over Distributed-IHT's
    round-R objective, on a simulation at one (alpha, beta), per algorithm."""

    name: str  # "Simulation I"
    rounds: int  # R
    alpha_beta: tuple[float, float]
    ratios: dict[str, float]  # {algorithm: claimed ratio}
    rows_per_client: int

    def setting(self, algorithm: str, loss: str) -> Setting:
        """The evidence the claim for ``algorithm`` needs: the simulation as the papers run it
        (N = 100 clients, d = 1,000, their rows per client, τ = 200), R rounds, the method and
        Distributed-IHT, SEEDS seeds (the papers state no number of repeats)."""
        return Setting(
            data=paper_data(self.name, *self.alpha_beta, self.rows_per_client),
            model=f"linear, {loss}",
            rounds=self.rounds,
            hyper={"τ": 200},
            methods=(analysis.label(algorithm), analysis.label(BASELINE)),
            seeds=SEEDS,
        )


def paper_data(name: str, alpha, beta, rows) -> dict:
    """A simulation's data in a Setting's terms.

    Parameters
    ----------
    name
        The simulation's name (``"Simulation I"``, ...).
    alpha
        Its α.
    beta
        Its β.
    rows
        Rows per client.

    Returns
    -------
    dict
        ``{data, α, β, d, clients, rows per client}``, with the papers' d = 1000 and 100
        clients.
    """
    return {"data": name, "α": alpha, "β": beta, "d": 1000, "clients": 100, "rows per client": rows}


# Keyed by (synthetic task, loss). A data set at another setting gets its measurement with
# what is unmet, never the papers' verdict.
CLAIMS = {
    ("linear", "least_squares"): SpeedUp(
        "Simulation I", 100, (0.1, 0.1), {"fedht": 1.7, "fediterht": 5.0}, 100
    ),
    ("logistic", "logistic"): SpeedUp("Simulation II", 200, (1.0, 1.0), {"fediterht": 4.0}, 1000),
}
SEEDS = 5
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
    """Table 2, and a note per section where it cannot be computed. A row of an algorithm the
    papers claim a speed-up for is judged against the claim's setting (``SpeedUp.setting``):
    ``agreement`` is the judged verdict, with ``seeds``, ``interval`` (of the ratio, a
    bootstrap over seeds), ``tolerance``, ``unmet`` and ``needs``."""
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
            claimed = claim.ratios.get(alg) if claim else None
            agreement, text = _verdict(alg, r, first, ratio, claim, claimed, int(c["round"].max()))
            if agreement == "" or claimed is None:
                judged = {}
            else:
                trivial = plateau is not None or first == 0
                if plateau is not None:
                    text += " " + trivial_text(r, plateau)
                judged = judge_speedup(a, sec, alg, r, claim, trivial)
                agreement = judged["verdict"]
                text += " " + verdict_sentence(judged)
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
                    "claim_source": claim.name if claim else None,
                    "claimed_ratio": claimed,
                    "agreement": agreement,
                    "verdict": text + _edge_caveat(a, sec.section, alg),
                    **{k: judged.get(k, "") for k in JUDGED},
                }
            )
    table = pd.DataFrame(rows, columns=R2T_COLUMNS)
    table["rounds_to_target"] = table["rounds_to_target"].astype("Int64")
    table["trivial"] = table["trivial"].astype(bool)
    table["claimed_ratio"] = table["claimed_ratio"].astype(float)
    table["seeds"] = pd.to_numeric(table["seeds"]).astype("Int64")
    return table, notes


JUDGED = ("seeds", "interval", "tolerance", "unmet", "needs", "stand_in")
R2T_COLUMNS = [
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
    *JUDGED,
]


def seed_curves(
    a: analysis.Analysis, section: str, algorithm: str
) -> tuple[np.ndarray, np.ndarray]:
    """Per-seed objective curves of an algorithm's best configuration on a section.

    Parameters
    ----------
    a
        The report's analysis (its ``seed_traces``).
    section
        The section.
    algorithm
        The algorithm.

    Returns
    -------
    tuple
        ``(rounds, objective)``: the rounds every seed evaluated (int64, ascending), and the
        objective as a float array of one row per run (by run id) and one column per round.
    """
    t = a.seed_traces
    t = t[(t["section"] == section) & (t["algorithm"] == algorithm)]
    wide = t.pivot_table(index="run_id", columns="round", values="objective").dropna(axis=1)
    return wide.columns.to_numpy(dtype=np.int64), wide.to_numpy(dtype=float)


def _first_at(rounds: np.ndarray, mean: np.ndarray, target: float) -> int | None:
    hit = rounds[mean <= target]
    return int(hit.min()) if len(hit) else None


def speedup_statistic(base_rounds, alg_rounds, r: int):
    """Table 2's speed-up, as a statistic of resampled seeds for :func:`bootstrap_interval`.

    Parameters
    ----------
    base_rounds
        The rounds of Distributed-IHT's per-seed curves (:func:`seed_curves`).
    alg_rounds
        The rounds of the algorithm's per-seed curves.
    r
        The horizon R; the target is Distributed-IHT's mean objective at its last evaluated
        round ≤ R.

    Returns
    -------
    callable
        ``ratio(alg, base)`` of per-seed curves (rows: seeds): R / the first round at which the
        algorithm's mean curve reaches the target; 0 if never, ∞ if at round 0.
    """
    last = np.flatnonzero(base_rounds <= r)[-1]

    def ratio(alg: np.ndarray, base: np.ndarray) -> float:
        first = _first_at(alg_rounds, alg.mean(axis=0), base.mean(axis=0)[last])
        if first is None:
            return 0.0
        return math.inf if first == 0 else r / first

    return ratio


def ran_of(a: analysis.Analysis, sec, algorithms: list[str]) -> Ran:
    """What the runs behind a comparison on a section were, in a SpeedUp setting's terms.

    Parameters
    ----------
    a
        The report's analysis.
    sec
        The section's row of ``a.sections``.
    algorithms
        The algorithms compared.

    Returns
    -------
    Ran
        The data (a synthetic set's generator parameters from its runs' configs), model, the
        rounds every run covers, the best configurations' τ values and methods, and the fewest
        seeds among them (0 unless every algorithm has a best configuration).
    """
    runs = a.runs[(a.runs["section"] == sec.section)]
    d = {
        **SYNTHETIC_DEFAULTS,
        **(a.data.configs([runs["run_id"].iloc[0]]).popitem()[1].get("dataset") or {}),
    }
    claim = _claim(sec)
    if sec.kind == "synthetic":
        rows = d["samples_per_client"] or (100 if sec.task == "linear" else 1000)
        name = claim.name if claim else f"synthetic {sec.task}"
        data = paper_data(name, sec.alpha, sec.beta, rows)
        data.update({"d": d["dim"], "clients": d["clients"]})
    else:
        data = {"data": sec.dataset}
    best = a.best[(a.best["section"] == sec.section) & a.best["algorithm"].isin(algorithms)]
    t = a.seed_traces
    t = t[(t["section"] == sec.section) & t["algorithm"].isin(algorithms)]
    last = t.groupby("run_id")["round"].max()
    taus = tuple(sorted({int(v) for v in best["sparsity"].dropna()})) if "sparsity" in best else ()
    return Ran(
        data=data,
        model=f"linear, {sec.loss}",
        rounds=int(last.min()) if len(last) else 0,
        hyper={"τ": taus},
        methods=tuple(analysis.label(x) for x in best["algorithm"]),
        seeds=int(best["seeds"].min()) if len(best) == len(algorithms) else 0,
    )


def judge_speedup(a: analysis.Analysis, sec, alg: str, r: int, claim: SpeedUp, trivial: bool):
    """The rounds claim for ``alg`` on a section, judged against the claim's setting.

    Parameters
    ----------
    a
        The report's analysis.
    sec
        The section's row of ``a.sections``.
    alg
        The algorithm the claim is about.
    r
        The horizon R of Table 2.
    claim
        The papers' speed-up claim for this data set.
    trivial
        The target is trivial: not measured (no interval is drawn).

    Returns
    -------
    dict
        ``verdict`` and the judged Claim's evidence fields (:data:`JUDGED`): the ratio's
        bootstrap interval over seeds, tolerance (≈ the claimed ratio), unmet needs, ...
    """
    setting = claim.setting(alg, sec.loss)
    ran = ran_of(a, sec, [alg, BASELINE])
    interval = None
    if not trivial:
        base_rounds, base = seed_curves(a, sec.section, BASELINE)
        alg_rounds, mine = seed_curves(a, sec.section, alg)
        statistic = speedup_statistic(base_rounds, alg_rounds, r)
        interval = bootstrap_interval([mine, base], statistic)
    placeholder = Claim("", "", "", "", NOT_MEASURED if trivial else AGREES)
    judged = judge(placeholder, setting, ran, about(claim.ratios[alg]), interval, _ratio_text)
    return {"verdict": judged.verdict, **{k: getattr(judged, k) for k in JUDGED}}


def _ratio_text(v: float) -> str:
    return "∞" if v == math.inf else f"{v:.3g}"


def verdict_sentence(judged: dict) -> str:
    """The judged verdict in a sentence, for the page."""
    v = judged["verdict"]
    if judged["unmet"]:
        return f"Not scored: not at the papers' setting ({judged['unmet']})."
    if v == NOT_MEASURED:
        return "Not scored."
    where = f"the ratio's 95 % interval {judged['interval'] or 'could not be drawn'}"
    return f"Verdict: {v} ({where}; the claim at its tolerance: {judged['tolerance']})."


def trivial_round(base: pd.DataFrame, r: int, target: float) -> int | None:
    """The round by which Distributed-IHT is already at the target, if that is early.

    Parameters
    ----------
    base
        Distributed-IHT's mean curve (``round``, ``mean``).
    r
        The horizon R.
    target
        Its mean objective at round R.

    Returns
    -------
    int or None
        R / 20 rounded up (at least 1) when the curve's minimum up to that round is at most
        ``target + TRIVIAL_TOL * |target|``; None otherwise, or for a non-finite target.
    """
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
    """``a`` with Distributed-IHT's best configuration and curves taken from ``b``.

    Parameters
    ----------
    a
        The analysis kept for every other algorithm (and its runs, sections, configs).
    b
        An analysis of fewer step sizes, Distributed-IHT's taken from it.
    edges
        Keep Distributed-IHT's grid edges; false: dropped (a step held on purpose is no edge
        to extend).

    Returns
    -------
    Analysis
        A new analysis; ``a`` and ``b`` are not changed.
    """
    base = b.best[b.best["algorithm"] == BASELINE]
    if not edges:
        base = base.assign(grid_edges="")
    best = pd.concat([a.best[a.best["algorithm"] != BASELINE], base], ignore_index=True)
    curves = pd.concat(
        [a.curves[a.curves["algorithm"] != BASELINE], b.curves[b.curves["algorithm"] == BASELINE]],
        ignore_index=True,
    )
    seeds = pd.concat(
        [
            a.seed_traces[a.seed_traces["algorithm"] != BASELINE],
            b.seed_traces[b.seed_traces["algorithm"] == BASELINE],
        ],
        ignore_index=True,
    )
    return analysis.Analysis(a.runs, a.sections, a.configs, best, curves, a.fstar, a.data, seeds)


def _edge_caveat(a: analysis.Analysis, section: str, algorithm: str) -> str:
    """A verdict drawn from a best configuration at the edge of its grid is provisional."""
    note = analysis.edge_note(a, section, algorithm)
    if not note:
        return ""
    return f" Provisional: in {analysis.label(algorithm)}'s best configuration, {note}."


def _claim(sec) -> SpeedUp | None:
    if sec.kind != "synthetic":
        return None
    return CLAIMS.get((sec.task, sec.loss))


def setting_text(claim: SpeedUp) -> str:
    """'Simulation I, (α, β) = (0.1, 0.1)': where the papers state a claim."""
    return f"{claim.name}, (α, β) = ({claim.alpha_beta[0]:g}, {claim.alpha_beta[1]:g})"


def _verdict(alg, r, first, ratio, claim, claimed, last_round) -> tuple[str, str]:
    """(agreement, sentence) from the mean curves: agreement is "" for the reference itself,
    "not measured here" where the papers make no claim, else a placeholder that
    ``judge_speedup`` replaces with the verdict judged against the claim's setting."""
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
        return NOT_MEASURED, ours + f"; the papers make no claim for {name} in {claim.name}."
    said = f"the papers claim ≈{claimed:g}x fewer ({setting_text(claim)})"
    if first == 0:
        return NOT_MEASURED, f"{ours}; {said}. Not comparable (the target is trivial)."
    return AGREES, f"{ours}; {said}."


def grid_sensitivity(
    source: ReportData | str | Path, a: analysis.Analysis, r2t: pd.DataFrame
) -> pd.DataFrame:
    """The rounds-to-target verdicts at the papers' step sizes beside those at all searched.

    A verdict drawn at the edge of the papers' grid may not survive a finer one.

    Parameters
    ----------
    source
        The results read (for the analysis at the papers' step sizes).
    a
        The report's analysis (all step sizes).
    r2t
        Its rounds-to-target table (:func:`rounds_to_target`).

    Returns
    -------
    pandas.DataFrame
        Columns ``section, algorithm, grid, best_config, rounds_to_target, agreement,
        verdict``: per section and algorithm the papers' grid's row, then ours. A verdict
        missing at the papers' grid gets a row saying why. Empty unless the sweep searched the
        papers' step sizes and more.
    """
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
    """Per reading and algorithm, the level reached and the rounds-to-target verdict.

    For simulation data sets run under several readings, so that a reading that speeds the
    methods up but stalls them higher shows as such.

    Parameters
    ----------
    a
        The report's analysis.
    r2t
        Its rounds-to-target table.
    reading
        Section to its reading's name.
    order
        The readings' order, the papers' first.
    held
        The rounds-to-target table with Distributed-IHT held at ``HELD_STEP``, whose rounds
        and verdicts become ``*_held`` columns; None: no such columns.

    Returns
    -------
    pandas.DataFrame
        One row per such section and algorithm with a best configuration: its final
        objective and rounds-to-target columns, sorted by (task, loss, α, β), then reading
        in ``order``, then algorithm. Empty unless some (task, loss, α, β) was run with two
        readings or more.
    """
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
