"""The report's page for the hard-thresholding family (seeds 000/001: Fed-HT, FedIter-HT and the
Distributed-IHT baseline): rounds to reach Distributed-IHT's objective against the papers'
claimed speed-ups, how those verdicts depend on the step-size grid, the final objective over step
size and local steps, and the effect of the non-IID level.

Its claims are the papers' headline speed-ups (analysis.CLAIMS), one per algorithm and data set
the papers make a numeric claim for, checked at this sweep's best configurations.
"""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from . import analysis as an
from .claims import (
    AGREES,
    DISAGREES,
    NO_CLAIM,
    NOT_MEASURED,
    PAPER_TEXT,
    VARIATION,
    Claim,
    Family,
    Reading,
    in_reading,
)
from .figures import heatmap_figure, noniid_figure
from .page import Page

__all__ = ["FAMILY", "build"]

PAPER = "Federated Nonconvex Sparse Learning (Fed-HT, FedIter-HT; seeds 000/001)"


def _center(config: dict) -> str:
    return (config.get("dataset") or {}).get("center", "none")


# The simulation data's readings (dataset.center): the papers' text generates the data and uses
# it as it is; centring it is ours.
READINGS = (
    Reading(
        "center = none",
        PAPER_TEXT,
        "The data as the papers' text generates them (Simulation I/II, LibSVM files), not centred.",
        lambda c: _center(c) == "none",
    ),
    Reading(
        "center = global",
        VARIATION,
        "The features' global mean is subtracted from the generated data, which the papers do "
        "not do.",
        lambda c: _center(c) == "global",
    ),
    Reading(
        "center = per_client",
        VARIATION,
        "Each client's own feature mean is subtracted from its generated data, which the papers "
        "do not do.",
        lambda c: _center(c) == "per_client",
    ),
)
READING_OF_CENTER = {r.name.split(" = ")[1]: r for r in READINGS}


def build(page: Page, results_dir: Path, tables: Path) -> list[Claim]:
    """Write the family's page; return the papers' speed-up claims as measured here."""
    a = an.analyse(results_dir)
    r2t, notes = an.rounds_to_target(a)
    sens = an.grid_sensitivity(results_dir, a, r2t)
    cells = an.heatmap_table(a)
    noniid = an.noniid_table(a)
    readings = an.readings_table(a, r2t)
    clock = wallclock_table(a, r2t)
    r2t.to_csv(tables / "rounds_to_target.csv", index=False)
    clock.to_csv(tables / "wallclock.csv", index=False)
    readings.to_csv(tables / "readings.csv", index=False)
    sens.to_csv(tables / "grid_sensitivity.csv", index=False)
    cells.to_csv(tables / "heatmap.csv", index=False)
    noniid.to_csv(tables / "noniid.csv", index=False)

    page.text("p", __doc__.split("\n\n", 1)[0].replace("\n", " "), "muted")
    ht = a.sections[a.sections["section"].isin(a.runs.loc[a.runs["algorithm"].isin(
        FAMILY.algorithms), "section"])]  # fmt: skip
    items = "".join(
        f'<li><a href="#ht-{html.escape(s.slug)}">{html.escape(s.section)}</a></li>'
        for s in ht.itertuples()
    )
    items += '<li><a href="#noniid">Effect of the non-IID level</a></li>'
    if not readings.empty:
        items += '<li><a href="#readings">Readings of the simulation data</a></li>'
    page.add(f"<nav><ul>{items}</ul></nav>")
    for sec in ht.itertuples():
        page.heading("h2", sec.section, f"ht-{sec.slug}")
        _rounds_to_target(page, sec, r2t[r2t["section"] == sec.section], notes)
        _wallclock(page, sec, clock[clock["section"] == sec.section])
        _grid_sensitivity(page, sec, sens[sens["section"] == sec.section])
        _heatmap(page, sec, cells[cells["section"] == sec.section])
    _noniid(page, noniid)
    _readings(page, readings)
    return claims(a, r2t, sens) + wallclock_claims(a, clock)


def claims(a: an.Analysis, r2t: pd.DataFrame, sens: pd.DataFrame) -> list[Claim]:
    """One claim per (data set, algorithm) the papers give a speed-up for."""
    out = []
    slugs = dict(zip(a.sections["section"], a.sections["slug"], strict=True))
    centers = dict(zip(a.sections["section"], a.sections["center"], strict=True))
    for row in r2t[r2t["claimed_ratio"].notna()].itertuples():
        best = a.best[(a.best["section"] == row.section) & (a.best["algorithm"] == row.algorithm)]
        seeds = int(best["seeds"].iloc[0]) if len(best) else 0
        if row.reached and row.rounds_to_target:
            ours = f"{row.ratio:.2g}x (round {row.rounds_to_target} vs {row.R})"
        elif row.reached:
            ours = "target met at round 0"
        else:
            ours = f"not reached within the run (target: round {row.R})"
        ours += f"; mean of {seeds} seed{'s' if seeds != 1 else ''}"
        ours += _seed_spread(a, row) + f", best config {row.best_config}"
        edge = an.edge_note(a, row.section, row.algorithm)
        if edge:
            ours += f" ({edge})"
        center = centers.get(row.section, "none")
        theirs = sens[(sens["section"] == row.section) & (sens["algorithm"] == row.algorithm)]
        if len(theirs) == 2:  # the same verdict at the papers' grid
            papers = theirs.iloc[0]
            if papers["best_config"] == "all configurations diverged":
                ours += "; at the papers' step-size grid every configuration diverged"
            else:
                at = (
                    f"round {papers['rounds_to_target']}"
                    if pd.notna(papers["rounds_to_target"])
                    else "not reached"
                )
                ours += f"; at the papers' step-size grid: {at} ({papers['agreement'] or 'n/a'})"
        claim = Claim(
            paper=PAPER,
            claim=f"{an.label(row.algorithm)} needs fewer rounds than Distributed-IHT to "
            f"reach Distributed-IHT's round-{row.R} objective",
            paper_value=f"≈{row.claimed_ratio:g}x fewer rounds ({_setting(a, row.section)})",
            ours=ours,
            verdict=row.agreement or NOT_MEASURED,
            where=row.section,
            anchor=f"r2t-{slugs[row.section]}",
        )
        out += in_reading([claim], READING_OF_CENTER[center])
    return out


def _setting(a: an.Analysis, section: str) -> str:
    """Where the papers state the claim a synthetic data set speaks to."""
    sec = next(a.sections[a.sections["section"] == section].itertuples())
    return an.setting_text(an.CLAIMS[(sec.task, sec.loss)])


# The papers' wall-clock model (seed 001, Fig. 4's caption): clients anywhere in the world, about
# 150 ms of network delay per round, 20 µs per local step; "at least 1.6 times faster".
ROUND_DELAY_S, STEP_S, CLAIMED_WALLCLOCK = 0.15, 2e-5, 1.6


def wallclock_table(a: an.Analysis, r2t: pd.DataFrame) -> pd.DataFrame:
    """The rounds-to-target comparison in the papers' simulated wall-clock time: each
    algorithm's time to reach Distributed-IHT's round-R objective (rounds x 150 ms + local
    steps per client x 20 µs), and Distributed-IHT's time over it."""
    cols = ["section", "algorithm", "rounds", "local_steps_per_client", "seconds", "speedup"]
    rows = []
    for section, t in r2t.groupby("section", sort=False):
        curves = a.curves[a.curves["section"] == section]
        seconds = {}
        for row in t.itertuples():
            if not row.reached:
                rows.append({"section": section, "algorithm": row.algorithm})
                continue
            c = curves[
                (curves["algorithm"] == row.algorithm) & (curves["round"] == row.rounds_to_target)
            ]
            steps = float(c["local_iterations"].iloc[0]) if len(c) else float("nan")
            r = row.rounds_to_target
            seconds[row.algorithm] = r * ROUND_DELAY_S + steps * STEP_S
            rows.append(
                {"section": section, "algorithm": row.algorithm, "rounds": r,
                 "local_steps_per_client": steps, "seconds": seconds[row.algorithm]}
            )  # fmt: skip
        base = seconds.get(an.BASELINE)
        for entry in rows:
            if entry["section"] == section and base and entry.get("seconds"):
                entry["speedup"] = base / entry["seconds"]
    out = pd.DataFrame(rows, columns=cols)
    out["rounds"] = out["rounds"].astype("Int64")
    return out


def wallclock_claims(a: an.Analysis, clock: pd.DataFrame) -> list[Claim]:
    """ "At least 1.6 times faster" in the wall-clock model, for every algorithm and data set
    the papers claim a speed-up in rounds for."""
    out = []
    slugs = dict(zip(a.sections["section"], a.sections["slug"], strict=True))
    for sec in a.sections.itertuples():
        claim = an.CLAIMS.get((sec.task, sec.loss)) if sec.kind == "synthetic" else None
        if claim is None:
            continue
        t = clock[clock["section"] == sec.section].set_index("algorithm")
        for alg in claim[3]:
            if alg not in t.index or an.BASELINE not in t.index:
                continue  # no best configuration: the rounds claim already says so
            speedup = t.loc[alg, "speedup"]
            if pd.isna(t.loc[alg, "seconds"]):
                ours, ok = "does not reach Distributed-IHT's target within the run", False
            else:
                ours = (f"{speedup:.2f}x ({t.loc[alg, 'seconds']:.2f} s against "
                        f"{t.loc[an.BASELINE, 'seconds']:.2f} s)")  # fmt: skip
                ok = speedup >= CLAIMED_WALLCLOCK
            verdict = AGREES if ok else DISAGREES
            if not an.at_papers_setting(sec, claim):
                verdict = NO_CLAIM
            found = Claim(
                paper=PAPER,
                claim=f"{an.label(alg)} reaches Distributed-IHT's objective faster in "
                "wall-clock time (150 ms per round, 20 µs per local step)",
                paper_value=f"at least {CLAIMED_WALLCLOCK:g}x faster ({an.setting_text(claim)})",
                ours=ours,
                verdict=verdict,
                where=sec.section,
                anchor=f"clock-{slugs[sec.section]}",
            )
            out += in_reading([found], READING_OF_CENTER[sec.center])
    return out


def _wallclock(page: Page, sec, clock: pd.DataFrame) -> None:
    if clock.empty:
        return
    page.heading("h3", "The same in the papers' wall-clock model", f"clock-{sec.slug}")
    page.text(
        "p",
        "Simulated time to reach the target with the papers' numbers: about 150 ms of network "
        "delay per round and 20 µs per local step (clients in parallel). The papers report the "
        "federated methods at least 1.6 times faster than Distributed-IHT this way. Any other "
        "numbers: a run's time_model (the trace's time column).",
    )
    shown = clock.drop(columns="section").copy()
    shown["algorithm"] = shown["algorithm"].map(an.label)
    reached = shown["rounds"].notna()
    shown = shown.astype(object)
    shown.loc[~reached, "rounds"] = "not reached"
    shown.loc[~reached, ["local_steps_per_client", "seconds", "speedup"]] = "–"
    page.table(
        shown,
        {
            "seconds": lambda v: f"{v:.3f}" if isinstance(v, float) else v,
            "speedup": lambda v: f"{v:.2f}x" if isinstance(v, float) else v,
        },
    )


def _seed_spread(a: an.Analysis, row) -> str:
    """When the first and the last seed reach the target (the min and max curves over seeds)."""
    c = a.curves[(a.curves["section"] == row.section) & (a.curves["algorithm"] == row.algorithm)]
    if c.empty or c["n"].max() < 2:
        return ""
    first = c.loc[c["min"] <= row.target, "round"]
    last = c.loc[c["max"] <= row.target, "round"]
    if first.empty:
        return " (no seed reaches it)"
    if last.empty:
        return f" (the first seed at round {first.min()}, not every seed)"
    return f" (seeds between rounds {first.min()} and {last.min()})"


def _ratio(v: float) -> str:
    return "∞" if v == float("inf") else f"{v:.2f}x"


def _rounds_to_target(page: Page, sec, t: pd.DataFrame, notes: dict) -> None:
    page.heading("h3", "Rounds to reach Distributed-IHT's objective", f"r2t-{sec.slug}")
    if sec.section in notes:
        page.text("p", notes[sec.section], "note")
        return
    if t.empty:
        return
    r, target = int(t["R"].iloc[0]), float(t["target"].iloc[0])
    page.text(
        "p",
        f"Target: Distributed-IHT's objective at round {r}, averaged over seeds, = "
        f"{target:.6g}. For each algorithm's best configuration, the first evaluated round at "
        "which its mean objective is at or below the target, and R / that round. The target is "
        "a mean over seeds of a stochastic curve that need not fall monotonically, so "
        "Distributed-IHT itself may touch it a little before round R: its row then shows that "
        "round, and that ratio is noise, not a speed-up.",
    )
    cols = ["algorithm", "best_config", "R", "rounds_to_target", "ratio", "claim_source"]
    shown = t[[*cols, "claimed_ratio"]].copy()
    shown["rounds_to_target"] = (
        shown["rounds_to_target"].astype(object).where(t["reached"], "not reached")
    )
    shown["ratio"] = shown["ratio"].astype(object).where(t["reached"], "")
    page.table(
        shown,
        {
            "ratio": lambda v: _ratio(v) if isinstance(v, float) else v,
            "claimed_ratio": lambda v: f"≈{v:g}x",
        },
    )
    items = "".join(f"<li>{html.escape(v)}</li>" for v in t["verdict"])
    page.add(f'<ul class="verdicts">{items}</ul>')


def _grid_sensitivity(page: Page, sec, sens: pd.DataFrame) -> None:
    """The verdicts at the papers' step sizes and at ours, side by side (when ours has more)."""
    if sens.empty:
        return
    page.heading("h3", "How the verdicts depend on the step-size grid", f"grid-{sec.slug}")
    page.text(
        "p",
        "The same rounds-to-target comparison twice: with only the papers' step sizes (each "
        "algorithm's best configuration and Distributed-IHT's target chosen among them), and "
        "with every step size this sweep searched. A verdict that changes was drawn at the "
        "edge of the smaller grid.",
    )
    shown = sens.drop(columns="section").copy()
    shown["algorithm"] = shown["algorithm"].map(an.label)
    shown["rounds_to_target"] = shown["rounds_to_target"].astype(object).fillna("not reached")
    page.table(shown)


def _heatmap(page: Page, sec, c: pd.DataFrame) -> None:
    page.text("h3", "Final objective over step size and local steps")
    if c.empty:
        page.text("p", "Neither Fed-HT nor FedIter-HT was run on this data set.", "note")
        return
    name = sec.section
    for alg in an.algorithm_order(c["algorithm"].unique()):  # one readable figure per panel
        page.figure(
            heatmap_figure(c[c["algorithm"] == alg], f"{name}, {an.label(alg)}"),
            f"heatmap_{sec.slug}_{alg}",
            f"heatmap, {name}, {an.label(alg)}",
        )
    page.add("<details><summary>Heatmap values</summary>")
    cols = ["algorithm", "stepsize", "local_steps", "cell", "configs", "valid_configs"]
    page.table(c[[*cols, "diverged_runs"]])
    page.add("</details>")


def _noniid(page: Page, noniid: pd.DataFrame) -> None:
    page.add('<h2 id="noniid">Effect of the non-IID level</h2>')
    if noniid.empty:
        page.text("p", "No synthetic data sets with (α, β) levels in these results.", "note")
        return
    page.text(
        "p",
        "Synthetic data sets of the same task at different (α, β) are different "
        "data sets; α controls how much the clients' local models differ, β how "
        "much their local data differ. Each point is an algorithm's best final "
        "objective (mean over seeds). The papers report that higher non-IIDness "
        "slows both federated methods down.",
    )
    for (task, loss), t in noniid.groupby(["task", "loss"], sort=True):
        t = t.dropna(axis=1, how="all").reset_index(drop=True)
        title = f"{task} task, {loss} loss"
        page.text("h3", title)
        if len(t) < 2:
            page.text("p", "Only one (α, β) level: no trend to show.", "muted")
        page.figure(
            noniid_figure(t, title),
            f"noniid_{an.slugify(task)}_{an.slugify(loss)}",
            f"non-IID effect, {title}",
        )
        page.table(t.drop(columns=["task", "loss"]).rename(columns=an.LABELS))


def readings_statements(readings: pd.DataFrame) -> list[str]:
    """Per data set and reading: which claims it reproduces, and the level reached next to
    the papers' reading's."""
    out = []
    keys = ["task", "loss", "alpha", "beta"]
    for key, group in readings.groupby(keys, sort=True):
        base = group[group["center"] == "none"]
        best_base = base["final_objective"].min() if len(base) else float("nan")
        for center, rows in group.groupby("center", sort=False):
            claimed = rows[rows["claimed_ratio"].notna()]
            agree = claimed.loc[claimed["agreement"] == "agrees", "algorithm"].map(an.label)
            what = (
                f"reproduces the claim for {', '.join(agree)}"
                if len(agree)
                else "reproduces none of the papers' speed-up claims"
            )
            text = f"{key[0]} task (α, β) = ({key[2]:g}, {key[3]:g}), center = {center}: {what}"
            level = rows["final_objective"].min()
            if center != "none" and pd.notna(best_base):
                text += f"; best level reached {level:.4g} against {best_base:.4g} as generated"
            out.append(text + ".")
    return out


def _readings(page: Page, readings: pd.DataFrame) -> None:
    if readings.empty:
        return
    page.heading("h2", "Readings of the simulation data", "readings")
    page.text(
        "p",
        "The same simulated data read three ways: as generated (center = none, the papers' "
        "text), with the features' global mean subtracted (global), or each client's own mean "
        "(per_client). The last two are deviations from the papers, labelled in the data set's "
        "name and run id. For each reading: every algorithm's level reached (the best "
        "configuration's mean final objective) and its rounds-to-target verdict against the "
        "papers' claim. A reading that makes the federated methods reach Distributed-IHT's "
        "target sooner but stall at a higher objective does not reproduce the claim's spirit: "
        "read the level next to the ratio.",
    )
    items = "".join(f"<li>{html.escape(t)}</li>" for t in readings_statements(readings))
    page.add(f'<ul class="verdicts">{items}</ul>')
    shown = readings.copy()
    shown["algorithm"] = shown["algorithm"].map(an.label)
    shown["rounds_to_target"] = shown["rounds_to_target"].astype(object).fillna("not reached")
    shown["ratio"] = shown["ratio"].astype(object).where(shown["ratio"].notna(), "")
    page.table(
        shown,
        {
            "ratio": lambda v: _ratio(v) if isinstance(v, float) else v,
            "final_objective": lambda v: f"{v:.5g}",
            "claimed_ratio": lambda v: f"≈{v:g}x",
        },
    )


def _headline() -> tuple[tuple[str, str, str], ...]:
    """The papers' headline claims (the rounds and the wall-clock speed-ups) as stated."""
    out = []
    for claim in an.CLAIMS.values():
        where = an.setting_text(claim)
        for alg, ratio in claim[3].items():
            name = an.label(alg)
            rounds = f"{name} needs fewer rounds than Distributed-IHT to reach Distributed-IHT's "
            rounds += f"round-{claim[1]} objective"
            clock = f"{name} reaches Distributed-IHT's objective faster in wall-clock time "
            clock += "(150 ms per round, 20 µs per local step)"
            out.append((rounds, f"≈{ratio:g}x fewer rounds ({where})", "paper"))
            out.append((clock, f"at least {CLAIMED_WALLCLOCK:g}x faster ({where})", "paper"))
    return tuple(out)


FAMILY = Family(
    key="ht",
    title="Hard thresholding: Fed-HT, FedIter-HT and Distributed-IHT (seeds 000/001)",
    paper=PAPER,
    algorithms=frozenset({"fedht", "fediterht", "distiht"}),
    build=build,
    readings=READINGS,
    headline=_headline(),
    configs="config/quick.yaml (or config/config.yaml)",
)
