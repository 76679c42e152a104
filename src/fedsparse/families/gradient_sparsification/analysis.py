"""The gradient-sparsification family's numbers: its runs (and the FedAvg baseline's) with
their readings, their values at a fixed time budget, each method's best configuration, the k
controllers' stability, the fairness view, the cross-application matrix of replayed k
sequences, and the paper's section-6 claims judged against their settings. ``figures.py``
draws them and ``report.py`` writes them into the family's page.

Every comparison is at a fixed time budget (the paper's x-axis): per data set and exchange time
beta, the largest time every compared run reached; a method's value is its best configuration's
(step size, batch size, ...) mean over seeds, interpolated at the budget. Loss is the training
loss without the l2 term (train_loss), accuracy the test accuracy. FedAvg appears only on data
sets that also have gradient-sparsification runs.

Each claim is scored only from runs that meet the setting it declares (``paper_claims.CLAIMS``:
data, model, the horizon its subject must cover within the budget, hyperparameters, methods,
seeds), as the 95 % interval over seeds of the quantity it is about against its tolerance;
otherwise its row says "not at the paper's setting" and lists what is unmet, keeping the
values measured.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from ...query.read import sql_ident
from ...report.analysis import best_per_group
from ...report.claims import (
    AUTHORS_CODE,
    INCONCLUSIVE,
    NOT_MEASURED,
    PAPER_TEXT,
    VARIATION,
    Claim,
    Reading,
    in_reading,
    reading_of,
)
from ...report.data import ReportData, as_data, partitions_of
from ...report.evidence import Interval, Ran, Setting, judge, unmet
from .algorithms import SEARCH, FABTopK, FUBTopK, PeriodicK, SendAll, UTopK
from .paper_claims import (
    CLAIMS,
    FACTS,
    PaperClaim,
    gain_interval,
    margin_interval,
    method_label,
    n_params,
    per_seed_interval,
    ran_of,
    ratio_interval,
    run_facts,
    statistic_interval,
)

PAPER = "Han, Wang, Leung: Adaptive Gradient Sparsification for Efficient FL (ICDCS 2020)"
# The family's algorithms by their classes' names, in the order the page lists them.
FAB, UTOPK, FUB, PERIODIC, SENDALL = (
    cls.name for cls in (FABTopK, UTopK, FUBTopK, PeriodicK, SendAll)
)
GS = (FAB, UTOPK, FUB, PERIODIC, SENDALL)
# the page method of FUB-top-k with merge: tree (the authors' code's FUB_top_K)
FUB_TREE = f"{FUB} merge=tree"
# The baselines the page takes from another family (families/fedavg), by algorithm name: their
# runs are read on the data sets that also have runs of this family.
BASELINES = ("fedavg",)
(FEDAVG,) = BASELINES
CONTROLLERS = SEARCH  # the k_control values that choose k online (a replay's is "sequence")
TUNED = ["stepsize", "batch_size", "k", "local_steps", "k_min", "k_max", "window", "expand"]

# ---- readings: the paper's setting with a network standing in for its CNN -----------------

# The paper: FEMNIST, 156 writers, a CNN with D = 444,062 and k = 1000 (k/D = 0.225 %),
# aggregation weights C_i / C. A run is in the paper's reading when it keeps those choices with a
# network model in place of the CNN; the k/D test applies to fixed-k runs only (an online
# controller's k is its starting point; sendall and FedAvg have no k). The readings say which
# choices a run made; whether its runs can carry a claim is the claim's Setting's to say.
K_OVER_D = (0.001, 0.005)
MANY_CLIENTS = 100


def _papers_setting_cnn(config: dict) -> bool:
    return (config.get("model") or {}).get("kind") == "cnn" and _papers_setting(config)


def _authors_code(config: dict) -> bool:
    """The authors' code's reading: its deal of the writers (partition writer_mix), its
    charge of periodic-k (charge authors_code) and its k controllers (k_rules authors_code),
    in the paper's setting otherwise."""
    part, params = config.get("partition"), config.get("params") or {}
    if not (isinstance(part, dict) and part.get("kind") == "writer_mix"):
        return False
    if config.get("algorithm") == PERIODIC and params.get("charge") != "authors_code":
        return False
    if params.get("k_control") in CONTROLLERS and params.get("k_rules") != "authors_code":
        return False
    return _papers_setting(config, ("writer_mix",))


def _papers_setting(config: dict, kinds: tuple[str, ...] = ("dirichlet", "one_class")) -> bool:
    model, params = config.get("model") or {}, config.get("params") or {}
    code = (
        params.get("charge") == "authors_code"
        or params.get("k_rules") == "authors_code"
        or params.get("merge") == "tree"
    )
    if code and "writer_mix" not in kinds:
        return False  # periodic-k charged, k chosen or FUB merged as the code does: not the text's
    part = config.get("partition")
    part = part if isinstance(part, dict) else {"kind": part}
    # FEMNIST's writers, Dirichlet clients standing in for them, or CIFAR-10's one-class clients
    clients = part.get("kind") in kinds and (part.get("clients") or 0) >= MANY_CLIENTS
    writers = part.get("kind") == "natural" and (config.get("dataset") or {}).get("kind") == "leaf"
    if model.get("kind") not in ("mlp", "cnn") or model.get("weights") != "samples":
        return False
    if not (clients or writers):
        return False
    k, control = params.get("k"), params.get("k_control") or "fixed"
    if k is None or control != "fixed":
        return True
    D = n_params(config)
    return D is not None and K_OVER_D[0] <= k / D <= K_OVER_D[1]


READINGS = (
    Reading(
        "the paper's setting and CNN",
        PAPER_TEXT,
        "Fig. 4's setting (aggregation weights C_i/C, k/D between 0.1 and 0.5 % against the "
        "paper's 1000/444,062 = 0.225 %, at least 100 Dirichlet clients or FEMNIST's writers "
        "against its 156, or CIFAR-10's 100 one-class clients) with a CNN (config/gs-paper-cnn"
        ".yaml, config/gs-cifar10.yaml: the paper's network without its parameter-free local "
        "response normalisation).",
        _papers_setting_cnn,
    ),
    Reading(
        "the authors' code, a network for its CNN",
        AUTHORS_CODE,
        "The authors' public code (PengchaoHan/Adaptive_Gradient_Sparsification_FL) where it "
        "differs from the text: its deal of the writers (partition writer_mix: half the clients "
        "a round-robin mix of half the writers, the rest one writer each; Dirichlet writers on "
        "Fashion-MNIST standing in for FEMNIST's) and periodic-k charged 2 beta k / D a round "
        "(charge: authors_code), k chosen online by its rules (k_rules: authors_code); the "
        "code's U_top_K is our fubtopk (a top-k downlink of the union), its FUB_top_K our "
        "fubtopk with merge: tree (the offers merged pairwise up a tree, a top-k at each "
        "merge); an MLP for its CNN.",
        _authors_code,
    ),
    Reading(
        "the paper's setting, MLP for the CNN",
        PAPER_TEXT,
        "Fig. 4's setting (aggregation weights C_i/C, k/D between 0.1 and 0.5 % against the "
        "paper's 1000/444,062 = 0.225 %, at least 100 Dirichlet clients or FEMNIST's writers "
        "against its 156) with a network (an MLP) standing in for its FEMNIST CNN, which we "
        "cannot run here.",
        _papers_setting,
    ),
    Reading(
        "another setting",
        VARIATION,
        "Not the paper's setting: a linear model, few one-class clients, uniform aggregation "
        "weights, fewer clients or another k/D.",
        lambda c: True,
    ),
)


# ---- reading ------------------------------------------------------------------------------
# What the page needs per run is SQL over the traces that returns one row per run (its last
# time, its loss and accuracy at the comparison's time budget); trace rows come back only for
# what a figure draws: the best configurations' runs, one run per k controller, and the
# fairness view summed per method, k and round.

# the loss a comparison uses: the training loss without the l2 term, else the objective
LOSS = "CASE WHEN train_loss IS NULL OR isnan(train_loss) THEN objective ELSE train_loss END"
RUN_COLUMNS = (
    "run_id",
    "dataset",
    "algorithm",
    "seed",
    "exchange_time",
    "k_control",
    "fill",
    "merge",
)
PARTS = ("fixed", "online", "replay")  # the comparisons a run can be in


def gs_runs(source: ReportData | str | Path) -> pd.DataFrame:
    """The runs the page compares, one row each.

    Parameters
    ----------
    source
        The build's results reader, or a results folder.

    Returns
    -------
    pandas.DataFrame
        One row per ok run of the family, and per run of a baseline (``BASELINES``) on a data
        set that has family runs (those with trace rows), by run id: identity and
        hyperparameters, ``method`` (algorithm and k controller), ``reading`` (the name of
        its reading in ``READINGS``), ``pos`` (its place in the results, the traces' order)
        and from its trace ``t_end`` and ``r_end`` (its last time and round), ``D`` (its
        parameters, None when unknown from the config), ``k_rows`` (rows with a k_m),
        ``test_rows`` (rows with a test accuracy), ``method_label`` (the paper's name of its
        method in its reading) and the ``ran_*`` facts of its data and model
        (:func:`paper_claims.run_facts`). Empty when the results hold no such run.
    """
    data = as_data(source)
    family = ", ".join(f"'{a}'" for a in GS)
    others = ", ".join(f"'{a}'" for a in BASELINES)
    cols = ", ".join(f"r.{sql_ident(c)}" for c in dict.fromkeys([*RUN_COLUMNS, *TUNED]))
    runs = data.frame(
        f"SELECT {cols}, t.t_end, t.r_end, t.k_rows, t.test_rows FROM runs r JOIN ("
        "SELECT run_id, max(time) FILTER (WHERE NOT isnan(time)) AS t_end, "
        "max(round) FILTER (WHERE NOT isnan(time)) AS r_end, "
        "count(k_used) AS k_rows, "
        "count(test_accuracy) FILTER (WHERE NOT isnan(test_accuracy)) AS test_rows "
        f"FROM traces WHERE algorithm IN ({family}, {others}) GROUP BY run_id) t "
        "ON r.run_id = t.run_id "
        f"WHERE r.status = 'ok' AND (r.algorithm IN ({family}) OR (r.algorithm IN ({others}) "
        f"AND r.dataset IN (SELECT dataset FROM runs WHERE algorithm IN ({family})))) "
        "ORDER BY r.run_id"
    )
    if runs.empty:
        return runs
    runs["method"] = [
        _method(r)
        for r in runs[["algorithm", "k_control", "fill", "merge", "local_steps"]].itertuples(
            index=False
        )
    ]
    runs["t_end"] = runs["t_end"].astype(float)
    order = data.run_frame(["run_id"])["run_id"]
    runs["pos"] = pd.Series(range(len(order)), index=order).reindex(runs["run_id"]).to_numpy()
    configs = data.configs(runs["run_id"])
    readings = [reading_of(READINGS, configs[str(r)]) for r in runs["run_id"]]
    runs["reading"] = [r.name for r in readings]
    runs["D"] = [n_params(configs[str(r)]) for r in runs["run_id"]]
    runs["method_label"] = [
        method_label(m, r.kind == AUTHORS_CODE)
        for m, r in zip(runs["method"], readings, strict=True)
    ]
    facts = [run_facts(configs[str(r)]) for r in runs["run_id"]]
    for key in (*FACTS, "model"):
        runs[f"ran_{key}"] = [f[key] for f in facts]
    return runs


def _method(row) -> str:
    """A run's page method from (algorithm, k_control, fill, merge, local_steps): the
    algorithm, its k controller unless fixed, its fill rule when not the clients' and its merge
    when a tree; FedAvg with its tau."""
    algorithm, control, fill, merge, local_steps = row
    if algorithm == FEDAVG:
        return f"{FEDAVG} (tau={local_steps})"
    name = algorithm if pd.isna(control) or control == "fixed" else f"{algorithm} {control}"
    return (
        name
        + (" fill=aggregate" if fill == "aggregate" else "")
        + (" merge=tree" if merge == "tree" else "")
    )


class GsTraces:
    """The page's reads of the traces of ``runs`` (:func:`gs_runs`' frame), each SQL returning
    one row per run or only what a figure draws. Accuracy is the test accuracy when some run
    has one, else the training accuracy."""

    def __init__(self, data: ReportData, runs: pd.DataFrame):
        self.data = data
        self.accuracy = "test_accuracy" if (runs["test_rows"] > 0).any() else "train_accuracy"

    def at_budget(self, runs: pd.DataFrame) -> pd.DataFrame:
        """``loss`` and ``accuracy`` of each run of ``runs`` with a ``budget``, interpolated at
        it over the run's rows where the value is known (np.interp's arithmetic; NaN when the
        last such row is more than 1e-9 before the budget), and its fairness view over all its
        rows: the smallest |J ∩ J_i| (``shared_min``) and the most idle clients in a round
        (``idle_max``); one row per run."""
        chosen = runs.loc[runs["budget"].notna(), ["run_id", "budget"]]
        chosen = chosen.assign(lim=chosen["budget"] - 1e-9)
        parts = [
            _interpolated(name, y) for name, y in (("loss", LOSS), ("accuracy", self.accuracy))
        ]
        aggregates = ", ".join(a for found, _ in parts for a in found)
        aggregates += ", min(t.min_shared) AS shared_min, max(t.idle_clients) AS idle_max"
        values = ", ".join(v for _, v in parts)
        return self.data.frame_with(
            f"SELECT run_id, {values}, shared_min, idle_max FROM (SELECT t.run_id, "
            "any_value(b.budget) AS budget, "
            f"any_value(b.lim) AS lim, {aggregates} FROM traces t JOIN _budgets b "
            f"ON t.run_id = b.run_id WHERE {partitions_of(runs)} AND t.time IS NOT NULL "
            "GROUP BY t.run_id) ORDER BY run_id",
            _budgets=chosen,
        )

    def rows(self, runs: pd.DataFrame, k_only: bool = False) -> pd.DataFrame:
        """The trace rows of some runs.

        Parameters
        ----------
        runs
            The runs, with ``pos`` (:func:`gs_runs`' frame or a part of it).
        k_only
            Only the rows with a k_m.

        Returns
        -------
        pandas.DataFrame
            run_id, round, time, loss, accuracy, k_used, in the results' order.
        """
        where = " AND t.k_used IS NOT NULL" if k_only else ""
        return self.data.frame_with(
            f"SELECT t.run_id, t.round, t.time, {LOSS} AS loss, {self.accuracy} AS accuracy, "
            f"t.k_used FROM traces t JOIN _ids i ON t.run_id = i.run_id "
            f"WHERE {partitions_of(runs)}{where} ORDER BY i.pos, t.round",
            _ids=runs[["run_id", "pos"]],
        )

    def fairness(self, runs: pd.DataFrame) -> pd.DataFrame:
        """Per method, k and round, over the rows of ``runs`` with a fairness view: the
        smallest |J ∩ J_i| (``shared_min``), the most idle clients (``idle_max``), the rows
        with an idle client (``idle_rounds``) and the sums and counts of min_shared and
        idle_clients that give their means over runs."""
        return self.data.frame_with(
            "SELECT i.method, i.k, t.round, min(t.min_shared) AS shared_min, "
            "sum(t.min_shared) AS shared_sum, count(*) AS shared_n, "
            "max(t.idle_clients) AS idle_max, sum(t.idle_clients) AS idle_sum, "
            "count(t.idle_clients) AS idle_n, count(*) FILTER (WHERE t.idle_clients > 0) "
            "AS idle_rounds FROM traces t JOIN _keys i ON t.run_id = i.run_id "
            f"WHERE {partitions_of(runs)} AND t.min_shared IS NOT NULL "
            "GROUP BY i.method, i.k, t.round ORDER BY i.method, i.k NULLS LAST, t.round",
            _keys=runs[["run_id", "method", "k"]],
        )


def _interpolated(name: str, y: str) -> tuple[list[str], str]:
    """(aggregates over a run's rows, the expression over them named ``name``) that give
    np.interp(budget, time, y) over the rows where ``y`` is known: y's first value before the
    first such row, its last at or after the last, else linear between the rows around the
    budget (as np.interp computes it); NULL when the last row is before ``lim``."""
    known = f"({y}) IS NOT NULL AND NOT isnan({y})"
    before, after = f"{known} AND t.time <= b.budget", f"{known} AND t.time > b.budget"
    n = name
    aggregates = [
        f"max(t.time) FILTER (WHERE {known}) AS {n}_end",
        f"arg_min({y}, t.time) FILTER (WHERE {known}) AS {n}_first",
        f"max(t.time) FILTER (WHERE {before}) AS {n}_x0",
        f"arg_max({y}, t.time) FILTER (WHERE {before}) AS {n}_y0",
        f"min(t.time) FILTER (WHERE {after}) AS {n}_x1",
        f"arg_min({y}, t.time) FILTER (WHERE {after}) AS {n}_y1",
    ]
    value = (
        f"CASE WHEN {n}_end IS NULL OR {n}_end < lim THEN NULL "
        f"WHEN {n}_x0 IS NULL THEN {n}_first "
        f"WHEN {n}_x1 IS NULL OR {n}_x0 = budget THEN {n}_y0 "
        f"ELSE ({n}_y1 - {n}_y0) / ({n}_x1 - {n}_x0) * (budget - {n}_x0) + {n}_y0 END AS {n}"
    )
    return aggregates, value


def replay_sources(source: ReportData | str | Path) -> pd.DataFrame:
    """Per replay run (k_control sequence): the replayed run and the beta it learned at."""
    runs = as_data(source).run_frame(["run_id", "exchange_time", "k_sequence_run"])
    rows = []
    beta = dict(zip(runs["run_id"], runs["exchange_time"], strict=True))
    replays = runs[runs["k_sequence_run"].notna()]
    for rid, seq in zip(replays["run_id"], replays["k_sequence_run"], strict=True):
        rows.append({"run_id": rid, "source": seq, "learned_at": beta.get(seq)})
    return pd.DataFrame(rows, columns=["run_id", "source", "learned_at"])


def client_contributions(source: ReportData | str | Path, run_ids: list[str]) -> pd.DataFrame:
    """What each client contributed to some runs.

    Parameters
    ----------
    source
        The build's results reader, or a results folder.
    run_ids
        The runs.

    Returns
    -------
    pandas.DataFrame
        Per run of ``run_ids`` and client, the totals the run stored (runs.parquet
        ``client_summary``): run_id, client, ``applied`` (elements of the client's offer
        applied), ``applied_per_round`` and ``idle_rounds`` (the rounds with none applied).
    """
    runs = as_data(source).client_summaries_of(run_ids)
    frames = [
        pd.DataFrame(json.loads(text)).assign(run_id=rid)
        for rid, text in zip(runs["run_id"], runs["client_summary"], strict=True)
    ]
    cols = ["run_id", "client", "applied", "applied_per_round", "idle_rounds"]
    return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)


def contribution_table(best: pd.DataFrame, contributions: pd.DataFrame) -> pd.DataFrame:
    """What each client contributed under each method's best configuration.

    Parameters
    ----------
    best
        The best configurations (:func:`best_configs`).
    contributions
        :func:`client_contributions` of their runs.

    Returns
    -------
    pandas.DataFrame
        Per client, for each method (mean over its seeds): elements applied per round and
        rounds with nothing applied, a column each; empty when no run stored its clients.
    """
    parts = []
    for method, runs in zip(best["method"], best["runs"], strict=True):
        mine = contributions[contributions["run_id"].isin(runs)]
        if mine.empty:
            continue
        g = mine.groupby("client")[["applied_per_round", "idle_rounds"]].mean()
        parts.append(
            g.rename(
                columns={
                    "applied_per_round": f"{method}: applied per round",
                    "idle_rounds": f"{method}: idle rounds",
                }
            )
        )
    return pd.concat(parts, axis=1).reset_index() if parts else pd.DataFrame()


def client_counts(source: ReportData | str | Path) -> dict[str, int]:
    """Clients per data set (the runs' ``clients`` fact: the partition's, else the data
    set's; the last run's where they differ)."""
    runs = as_data(source).run_frame(["dataset", "clients"])
    known = runs[runs["clients"].notna()]
    return {ds: int(n) for ds, n in zip(known["dataset"], known["clients"], strict=True)}


# ---- measuring ----------------------------------------------------------------------------


def with_budgets(runs: pd.DataFrame, sources: pd.DataFrame) -> pd.DataFrame:
    """Each run's comparison and its time budget.

    Parameters
    ----------
    runs
        :func:`gs_runs`' frame.
    sources
        :func:`replay_sources`.

    Returns
    -------
    pandas.DataFrame
        ``runs`` with ``part`` (the comparison a run is in, of ``PARTS``: fixed k, online k,
        or a replay of a learned sequence whose source is here; "" for none), ``learned_at``
        (a replay's source beta) and ``budget``: its comparison's fixed time budget, the
        largest time every run of the same reading, data set, part and beta reached.
    """
    control = runs["k_control"]
    fixed, online = control.isna() | (control == "fixed"), control.isin(CONTROLLERS)
    learned = runs[["run_id"]].merge(sources[["run_id", "learned_at"]], on="run_id", how="left")
    replay = (control == "sequence") & learned["learned_at"].notna().to_numpy()
    out = runs.assign(
        part=np.select([fixed, online, replay], PARTS, default=""),
        learned_at=learned["learned_at"].astype(float).to_numpy(),
    )
    groups = out.loc[out["part"] != ""].groupby(["reading", "dataset", "part", "exchange_time"])
    out["budget"] = groups["t_end"].transform("min")
    return out


def best_configs(runs: pd.DataFrame) -> pd.DataFrame:
    """Each method's best configuration at the budget.

    Parameters
    ----------
    runs
        One row per run with its ``method``, its hyperparameters (``TUNED``) and its
        ``loss`` and ``accuracy`` at the budget.

    Returns
    -------
    pandas.DataFrame
        Per method with a loss: the configuration (the hyperparameters some run has) with
        the lowest mean loss, its mean ``loss`` and ``accuracy``, its ``seeds`` and its
        ``runs`` (a list of run ids).
    """
    keys = [c for c in TUNED if runs[c].notna().any()]
    # an integer hyperparameter some runs lack (k for send-all) is a float column, NaN there
    integers = [c for c in keys if pd.api.types.is_integer_dtype(runs[c].dtype)]
    numbers = {c: "int64" if runs[c].notna().all() else "float64" for c in integers}
    cfg = (
        runs.astype(numbers)
        .groupby(["method", *keys], dropna=False)
        .agg(
            loss=("loss", "mean"),
            accuracy=("accuracy", "mean"),
            seeds=("run_id", "size"),
            runs=("run_id", list),
        )
        .reset_index()
    )
    best = best_per_group(cfg, ["method"], "loss", "lower")
    return best.sort_values("method", kind="stable").reset_index(drop=True)


def cross_matrix(replays: pd.DataFrame, column: str = "loss") -> pd.DataFrame:
    """The cross-application matrix of replayed k sequences.

    Parameters
    ----------
    replays
        One row per replay, with ``learned_at``, ``exchange_time`` and ``column`` at its
        budget.
    column
        The value compared.

    Returns
    -------
    pandas.DataFrame
        Rows: the beta a sequence was learned at; columns: the beta it was replayed at; cell:
        the mean ``column`` (NaN-skipping) of those replays. Empty when no replay has a
        source here.
    """
    rep = replays.dropna(subset=["learned_at"])
    if rep.empty:
        return pd.DataFrame()
    cells = {}
    for beta, col in rep.groupby("exchange_time"):
        for learned, cell in col.groupby("learned_at"):
            cells[(learned, beta)] = float(np.nanmean(cell[column].to_numpy(float)))
    m = pd.Series(cells).unstack()
    m.index.name, m.columns.name = "learned at beta", "run at beta"
    return m


def diagonal_wins(matrix: pd.DataFrame) -> tuple[int, int]:
    """Columns where the sequence learned at that beta has the lowest loss, of the columns
    that hold it."""
    cols = [b for b in matrix.columns if b in matrix.index and matrix[b].notna().sum() > 1]
    wins = sum(int(matrix[b].idxmin() == b) for b in cols)
    return wins, len(cols)


def k_stability(df: pd.DataFrame) -> float:
    """Mean over runs of the standard deviation of log k_used over the second half of the
    run's evaluated rounds (how much k_m fluctuates once it should have settled)."""
    out = []
    for _, r in df.dropna(subset=["k_used"]).groupby("run_id"):
        late = r[r["round"] > r["round"].max() / 2]["k_used"].astype(float)
        if len(late) > 1:
            out.append(float(np.log(late).std()))
    return float(np.mean(out)) if out else float("nan")


def late_k(df: pd.DataFrame) -> float:
    """Mean k_used over the second half of the runs' evaluated rounds."""
    r = df.dropna(subset=["k_used"])
    late = r[r["round"] > r.groupby("run_id")["round"].transform("max") / 2]
    return float(late["k_used"].astype(float).mean()) if len(late) else float("nan")


def fairness_table(counts: pd.DataFrame, n_clients: int | None) -> pd.DataFrame:
    """The fairness view of the fixed-k runs in one table.

    Parameters
    ----------
    counts
        :meth:`GsTraces.fairness` of the runs.
    n_clients
        The data set's clients N (None: unknown).

    Returns
    -------
    pandas.DataFrame
        Per fixed-k method and k: the FAB floor floor(k / N) (None without N or k), the
        smallest |J ∩ J_i| seen, how often some client had nothing applied, and the most
        idle clients in a round.
    """
    rows = []
    for (method, k), r in counts.groupby(["method", "k"], dropna=False):
        idle_n = int(r["idle_n"].sum())
        idle = int(r["idle_rounds"].sum()) / idle_n if idle_n else float("nan")
        rows.append(
            {
                "method": method,
                "k": k,
                "floor k/N": (int(k) // n_clients) if n_clients and pd.notna(k) else None,
                "min |J ∩ J_i|": int(r["shared_min"].min()),
                "rounds with an idle client": f"{idle:.0%}",
                "max idle clients": int(r["idle_max"].max()),
            }
        )
    return pd.DataFrame(rows)


def k_runs(reader: GsTraces, runs: pd.DataFrame) -> pd.DataFrame:
    """The k_m trajectories the page draws.

    Parameters
    ----------
    reader
        The reader of the traces of ``runs``.
    runs
        A data set's runs (:func:`gs_runs`' frame).

    Returns
    -------
    pandas.DataFrame
        Per beta and k controller (or replay), one run, the first in the results with k_m
        values: its rows with a k_m (run_id, round, k_used) with its method and beta
        (exchange_time). Empty when no such run.
    """
    online = runs[runs["k_control"].isin([*CONTROLLERS, "sequence"]) & (runs["k_rows"] > 0)]
    first = online.sort_values("pos").groupby(["exchange_time", "method"]).head(1)
    if first.empty:
        return pd.DataFrame()
    rows = reader.rows(first, k_only=True)[["run_id", "round", "k_used"]]
    return rows.merge(first[["run_id", "method", "exchange_time"]], on="run_id")


def measured(data: ReportData, runs: pd.DataFrame) -> tuple[pd.DataFrame, GsTraces]:
    """The runs with the comparison each is in and their values at its time budget.

    Parameters
    ----------
    data
        The build's results reader.
    runs
        :func:`gs_runs`' frame, not empty.

    Returns
    -------
    tuple
        ``runs`` with :func:`with_budgets`' columns and :meth:`GsTraces.at_budget`'s values
        (NaN where a run has none), and the reader of their traces.
    """
    reader = GsTraces(data, runs)
    runs = with_budgets(runs, replay_sources(data))
    return runs.merge(reader.at_budget(runs), on="run_id", how="left"), reader


class OnlineBest(NamedTuple):
    """The k controllers' comparison at one beta (:func:`online_best`)."""

    best: pd.DataFrame  # best_configs, with "k stability" and "late mean k"
    rows: pd.DataFrame  # the trace rows of the best configurations' runs (GsTraces.rows)
    stability: dict[str, float]  # per run of them: k_stability
    late: dict[str, float]  # per run of them: late_k


def online_best(reader: GsTraces, at: pd.DataFrame) -> OnlineBest:
    """Each method's best configuration among the online-k runs at one beta, with how steady
    its k_m is.

    Parameters
    ----------
    reader
        The reader of the traces of ``at``.
    at
        The online-k runs of one data set and beta, with their values at the budget.

    Returns
    -------
    OnlineBest
        :func:`best_configs` of ``at`` with ``k stability`` (:func:`k_stability`) and ``late
        mean k`` (:func:`late_k`) over each configuration's runs, the trace rows of those
        runs, and both values per run.
    """
    best = best_configs(at)
    rows = reader.rows(at[at["run_id"].isin(best_runs(best))])
    per_run = {rid: r for rid, r in rows.groupby("run_id")}
    stability = {rid: k_stability(r) for rid, r in per_run.items()}
    late = {rid: late_k(r) for rid, r in per_run.items()}
    best["k stability"] = [k_stability(rows[rows["run_id"].isin(r)]) for r in best["runs"]]
    best["late mean k"] = [late_k(rows[rows["run_id"].isin(r)]) for r in best["runs"]]
    return OnlineBest(best, rows, stability, late)


def rounds_at_budget(runs: pd.DataFrame, run_ids: list[str]) -> float:
    """The fewest rounds any run of ``run_ids`` ran within its budget: its rounds scaled by
    budget / its last time, exact at a constant time per round (fixed k).

    Parameters
    ----------
    runs
        Runs with ``budget``, ``t_end`` and ``r_end``.
    run_ids
        The runs to count, of ``runs``.

    Returns
    -------
    float
        The fewest rounds, 0 when none of ``run_ids`` is in ``runs``.
    """
    mine = runs[runs["run_id"].isin(run_ids)]
    share = (mine["budget"] / mine["t_end"].where(mine["t_end"] > 0)).clip(upper=1.0).fillna(1.0)
    return float((mine["r_end"] * share).min()) if len(mine) else 0.0


def best_runs(best: pd.DataFrame) -> list[str]:
    """The runs of ``best``'s configurations (:func:`best_configs`' frame)."""
    return [rid for runs in best["runs"] for rid in runs]


# ---- the claims -----------------------------------------------------------------------------


def _fmt(v: float) -> str:
    return f"{v:.3g}"


def pct(v: float) -> str:
    """A relative change as a signed percentage: '+12.3%'."""
    return f"{v:+.1%}"


def setting_of(claim: PaperClaim, reading_kind: str, data: object) -> Setting:
    """A paper claim's Setting in a reading, for runs on ``data``.

    The one place the page asks for a setting, so that a test may declare a small one here.

    Parameters
    ----------
    claim
        The paper's claim.
    reading_kind
        The reading measured (the paper's text, the authors' code, or a variation of ours,
        held to the text).
    data
        The runs' ``data`` value (on CIFAR-10, a claim Fig. 8 states gets Fig. 8's setting).

    Returns
    -------
    Setting
    """
    return claim.setting(reading_kind, data)


@dataclass(frozen=True)
class _Gain:
    """A comparison the headline may be drawn from: the relative accuracy ``gain`` of its best
    method over its worst with its interval, the claim whose setting it needs (``source``),
    the runs behind it and where it was measured."""

    gain: Interval
    source: PaperClaim
    ran: Ran
    where: str


class ClaimRows:
    """Collects the page's Claim rows, each judged against its setting in the reading being
    measured (``reading``), and this reading's comparisons behind the headline (``gains``)."""

    def __init__(self):
        self.rows: list[Claim] = []
        self.reading: Reading = READINGS[-1]
        self.gains: list[_Gain] = []

    def setting(self, claim: PaperClaim, ran: Ran) -> Setting:
        """``claim``'s setting in this reading, for runs on ``ran``'s data."""
        return setting_of(claim, self.reading.kind, ran.data.get("data"))

    def judge(
        self,
        claim: PaperClaim,
        ours: str,
        where: str,
        anchor: str,
        ran: Ran,
        interval: Interval | None,
        setting: Setting | None = None,
        fmt=_fmt,
    ) -> Claim:
        """One row, judged and collected.

        Parameters
        ----------
        claim
            The paper's claim measured.
        ours
            Its values here, in words.
        where, anchor
            Where it was measured (data set, beta, ...) and the page's anchor there.
        ran
            The runs the values come from.
        interval
            The 95 % interval over seeds of the claim's quantity; None: not measured here.
        setting
            The setting to judge against (the headline's source's); by default ``claim``'s
            in this reading.
        fmt
            How the interval's numbers are written.

        Returns
        -------
        Claim
            The row, in this reading; with nothing ran, nothing is listed as unmet.
        """
        setting = setting or self.setting(claim, ran)
        verdict = NOT_MEASURED if interval is None else INCONCLUSIVE
        found = Claim(PAPER, claim.text, claim.value, ours, verdict, where, anchor)
        row = in_reading([judge(found, setting, ran, claim.band, interval, fmt)], self.reading)[0]
        if ran == Ran():  # nothing ran: nothing to list as unmet
            row = replace(row, unmet="")
        self.rows.append(row)
        return row

    def met(self, claim: PaperClaim, ran: Ran) -> bool:
        """Whether the runs ``ran`` meet ``claim``'s setting in this reading."""
        return not unmet(self.setting(claim, ran), ran)[0]


def _compare(best: pd.DataFrame, a: str, others: list[str], column: str) -> tuple[bool | None, str]:
    """Whether method ``a`` beats every one of ``others`` on ``column`` (loss: lower) by the
    means over seeds, and those means in words; None (not measured) when a value is missing,
    e.g. no accuracy for this data set."""
    v = dict(zip(best["method"], best[column], strict=True))
    better = (lambda x, y: x < y) if column == "loss" else (lambda x, y: x > y)
    text = ", ".join(f"{m} {v[m]:.4g}" for m in [a, *others])
    if any(pd.isna(v[m]) for m in [a, *others]):
        return None, text + f" (no {column} for some of them)"
    return all(better(v[a], v[m]) for m in others), text


def _runs_of(best: pd.DataFrame, method: str) -> list[str]:
    """The runs (seeds) of ``method``'s best configuration."""
    return list(best.set_index("method").loc[method, "runs"])


def _values(at: pd.DataFrame, best: pd.DataFrame, method: str, column: str) -> np.ndarray:
    """Per seed, ``column`` at the budget of ``method``'s best configuration's runs."""
    return at.set_index("run_id").loc[_runs_of(best, method), column].to_numpy(float)


def _ran(at, best, methods, claims: ClaimRows, rounds, claim: PaperClaim) -> Ran:
    """What the runs of ``methods``' best configurations were, for ``claim``."""
    ids = [r for m in methods for r in _runs_of(best, m)]
    rows = at[at["run_id"].isin(ids)]
    labels = list(dict.fromkeys(rows.set_index("method").loc[methods, "method_label"]))
    return ran_of(rows, claims.reading.kind, labels, rounds, claim)


def judge_fig4(
    at: pd.DataFrame, best: pd.DataFrame, claims: ClaimRows, where: str, anchor: str
) -> Claim | None:
    """Fig. 4's claims at one beta: FAB-top-k against the baselines present (the authors'
    code's U_top_K is a top-k downlink of the union: our fubtopk), against FedAvg, and FUB-top-k
    similar to it (the authors' code's FUB_top_K: our fubtopk with merge: tree); the horizon is
    FAB-top-k's rounds within the budget.

    Parameters
    ----------
    at
        The fixed-k runs of one data set and beta, with their values at the budget.
    best
        Their best configurations (:func:`best_configs`), FAB-top-k's among them.
    claims
        Where the rows go (and the comparison behind the headline).
    where, anchor
        Where the comparison is, in words, and its anchor on the page.

    Returns
    -------
    Claim or None
        The last row against the baselines, whose setting the page states; None when no
        baseline ran.
    """
    methods = set(best["method"])
    authors = claims.reading.kind == AUTHORS_CODE
    rivals = (FUB if authors else UTOPK, PERIODIC, FEDAVG, SENDALL)
    baselines = [m for m in best["method"] if m.split(" ")[0] in rivals and m != FUB_TREE]
    rounds = rounds_at_budget(at, _runs_of(best, FAB))
    row = None
    if baselines:
        named = f" ({FUB}: the code's U_top_K)" if authors and FUB in methods else ""
        ran = _ran(at, best, [FAB, *baselines], claims, rounds, CLAIMS["fig4_loss"])
        for key, column in (("fig4_loss", "loss"), ("fig4_accuracy", "accuracy")):
            _, text = _compare(best, FAB, baselines, column)
            fab = _values(at, best, FAB, column)
            others = [_values(at, best, m, column) for m in baselines]
            interval = margin_interval(fab, others, lower_is_better=column == "loss")
            row = claims.judge(CLAIMS[key], text + named, where, anchor, ran, interval)
        fab = _values(at, best, FAB, "accuracy")
        gain = gain_interval(fab, [_values(at, best, m, "accuracy") for m in baselines])
        if gain is not None:
            source = CLAIMS["fig4_accuracy"]
            claims.gains.append(_Gain(gain, source, ran, f"FAB vs worst baseline, {where}"))
    fedavg = [m for m in best["method"] if m.startswith(FEDAVG)]
    if fedavg:
        ran = _ran(at, best, [FAB, *fedavg], claims, rounds, CLAIMS["fig4_fedavg"])
        _, text = _compare(best, FAB, fedavg, "loss")
        others = [_values(at, best, m, "loss") for m in fedavg]
        interval = margin_interval(_values(at, best, FAB, "loss"), others)
        claims.judge(CLAIMS["fig4_fedavg"], text, where, anchor, ran, interval)
    claim = CLAIMS["fub_similar"]
    fub_method = FUB_TREE if authors else FUB
    if authors and FUB_TREE not in methods:
        claims.judge(
            claim,
            "the authors' code's FUB_top_K merges the offers pairwise up a tree, a top-k at "
            f"each merge; not run here ({FUB} with merge: tree; {FUB} plays the code's U_top_K "
            "in this reading)",
            where,
            anchor,
            _ran(at, best, [FAB], claims, rounds, claim),
            None,
        )
    elif fub_method in methods:
        ran = _ran(at, best, [FAB, fub_method], claims, rounds, claim)
        fub, fab = _values(at, best, fub_method, "loss"), _values(at, best, FAB, "loss")
        ratio = ratio_interval(fub, fab)
        ours = f"FUB/FAB loss ratio {np.nanmean(fub) / np.nanmean(fab):.3f}"
        claims.judge(claim, ours, where, anchor, ran, ratio)
    return row


def judge_fairness(
    per_run: pd.DataFrame, n_clients: int | None, claims: ClaimRows, where: str, anchor: str
) -> None:
    """FAB-top-k's guarantee and FUB-top-k's idle clients, per k, each from its runs'
    per-seed values: FAB-top-k's shortfall floor(k/N) - min |J ∩ J_i|, FUB-top-k's most idle
    clients in a round.

    Parameters
    ----------
    per_run
        One row per fixed-k run with a fairness view: the page's frame with
        :meth:`GsTraces.at_budget`'s ``shared_min`` and ``idle_max``.
    n_clients
        The data set's clients N (None: unknown, the floor is 0).
    claims
        Where the rows go.
    where, anchor
        Where the comparison is, in words (" (k = ...)" is added when k was swept), and its
        anchor on the page.
    """
    several = per_run.groupby("method")["k"].nunique().max() > 1  # a claim per k when swept
    authors = claims.reading.kind == AUTHORS_CODE
    # the authors' code's FUB-top-k is fubtopk's tree merge, when it ran
    fub = FUB_TREE if authors and (per_run["method"] == FUB_TREE).any() else FUB
    for method, key in ((FAB, "fab_fair"), (fub, "fub_idle")):
        for k, runs in per_run[per_run["method"] == method].groupby("k"):
            at_k = f"{where} (k = {k:g})" if several else where
            floor = int(k) // n_clients if n_clients else 0
            shared, idle = runs["shared_min"].astype(float), runs["idle_max"].astype(float)
            if method == FAB:
                values = floor - shared
                ours = f"min |J ∩ J_i| = {shared.min():.0f} (floor {floor}), max idle clients "
                ours += f"{idle.max():.0f}"
            else:
                values = idle
                ours = f"up to {idle.max():.0f} idle clients in a round"
            labels = list(dict.fromkeys(runs["method_label"]))
            ran = ran_of(runs, claims.reading.kind, labels, None, CLAIMS[key])
            if method == FUB and authors:
                # the code's FUB-top-k is another algorithm: what fubtopk shows is U_top_K's
                ours = (
                    "the authors' code's FUB_top_K merges the offers pairwise up a tree, a top-k "
                    f"at each merge; not run here ({FUB} with merge: tree; {FUB}, the code's "
                    f"U_top_K: {ours})"
                )
                claims.judge(CLAIMS[key], ours, at_k, anchor, ran, None)
                continue
            claims.judge(CLAIMS[key], ours, at_k, anchor, ran, per_seed_interval(values))


def judge_controllers(
    at: pd.DataFrame, online: OnlineBest, claims: ClaimRows, where: str, anchor: str
) -> tuple[list[Claim], tuple[list[float], list[str]] | None]:
    """Figs. 5 and 6 at one beta, for each Algorithm 3 (k_control online_extended) method.

    Parameters
    ----------
    at
        The online-k runs of one data set and beta, with their values at the budget.
    online
        Their best configurations and k_m's steadiness (:func:`online_best`).
    claims
        Where the rows go (and the comparisons behind the headline).
    where, anchor
        Where the comparison is, in words, and its anchor on the page.

    Returns
    -------
    tuple
        The rows whose settings the page states (one per Algorithm 3 method with a rival),
        and the last Algorithm 3 method's per-seed late mean k with its runs, for Fig. 7's
        claim (:func:`judge_fig7_k`); None when no Algorithm 3 method ran.
    """
    best = online.best
    stability = {
        m: [online.stability.get(r, np.nan) for r in _runs_of(best, m)] for m in best["method"]
    }
    stated, late = [], None
    for a3 in [m for m in best["method"] if m.endswith("online_extended")]:
        runs_a3 = _runs_of(best, a3)
        late = ([online.late.get(r, np.nan) for r in runs_a3], runs_a3)
        row = _judge_fig5_6(at, best, a3, stability, claims, where, anchor)
        if row is not None:
            stated.append(row)
    return stated, late


def _judge_fig5_6(at, best, a3, stability, claims: ClaimRows, where, anchor) -> Claim | None:
    """Figs. 5 and 6 at one beta: Algorithm 3 (method ``a3``) against the other controllers
    over the same algorithm and against Algorithm 2 (``stability``: per method, its runs'
    std of log k_m); the horizon is Algorithm 3's rounds within the budget. Returns the row
    whose setting the page states, None when neither comparison has runs."""
    algo = a3.split(" ")[0]
    by = best.set_index("method")
    rivals = [f"{algo} {c}" for c in ("value_ogd", "exp3", "bandit") if f"{algo} {c}" in by.index]
    rounds = rounds_at_budget(at, _runs_of(best, a3))
    loss = {m: _values(at, best, m, "loss") for m in best["method"]}
    row = None
    if rivals:
        ran = _ran(at, best, [a3, *rivals], claims, rounds, CLAIMS["fig5_loss"])
        _, text = _compare(best, a3, rivals, "loss")
        interval = margin_interval(loss[a3], [loss[r] for r in rivals])
        row = claims.judge(CLAIMS["fig5_loss"], text, where, anchor, ran, interval)
        jumpy = [r for r in rivals if not r.endswith("value_ogd")]
        if jumpy:
            ran = _ran(at, best, [a3, *jumpy], claims, rounds, CLAIMS["fig5_stable"])
            text = ", ".join(f"{m} {by.loc[m, 'k stability']:.3g}" for m in [a3, *jumpy])
            interval = margin_interval(stability[a3], [stability[r] for r in jumpy])
            claims.judge(
                CLAIMS["fig5_stable"], f"std of log k_m: {text}", where, anchor, ran, interval
            )
        acc = [_values(at, best, m, "accuracy") for m in rivals]
        gain = gain_interval(_values(at, best, a3, "accuracy"), acc)
        if gain is not None:
            where_gain = f"Algorithm 3 vs worst controller, {where}"
            claims.gains.append(_Gain(gain, CLAIMS["fig5_loss"], ran, where_gain))
    a2 = f"{algo} online"
    if a2 in by.index:
        ran = _ran(at, best, [a3, a2], claims, rounds, CLAIMS["fig6"])
        _, text = _compare(best, a3, [a2], "loss")
        text += f"; std of log k_m {by.loc[a3, 'k stability']:.3g} vs "
        text += f"{by.loc[a2, 'k stability']:.3g}"
        groups = [loss[a3], loss[a2], stability[a3], stability[a2]]
        interval = statistic_interval(groups, _both_margins)
        fig6 = claims.judge(CLAIMS["fig6"], text, where, anchor, ran, interval)
        row = row or fig6
    return row


def _both_margins(loss_a3, loss_a2, stab_a3, stab_a2) -> float:
    """The smaller of Algorithm 2's margins over Algorithm 3 in loss and in k_m's
    fluctuation: positive when Algorithm 3 is better in both."""
    loss = float(np.mean(loss_a2) - np.mean(loss_a3))
    return min(loss, float(np.mean(stab_a2) - np.mean(stab_a3)))


def judge_fig7_k(
    runs: pd.DataFrame,
    lates: dict[float, tuple[list[float], list[str]]],
    claims: ClaimRows,
    ds: str,
    anchor: str,
) -> None:
    """Fig. 7: Algorithm 3's late mean k_m falls as beta grows; the horizon is its runs'
    rounds in all (the late k is their second half's).

    Parameters
    ----------
    runs
        The data set's runs (those of ``lates`` among them).
    lates
        Per beta: Algorithm 3's best configuration's per-seed late mean k and its runs
        (:func:`judge_controllers`), two betas or more.
    claims
        Where the row goes.
    ds, anchor
        The data set and the page's anchor of the k_m trajectories.
    """
    betas = sorted(lates)
    means = [np.nanmean(lates[b][0]) for b in betas]
    ids = [r for b in betas for r in lates[b][1]]
    rows = runs[runs["run_id"].isin(ids)]
    labels = list(dict.fromkeys(rows["method_label"]))
    ran = ran_of(rows, claims.reading.kind, labels, rows["r_end"].min(), CLAIMS["fig7_k"])
    interval = statistic_interval([lates[b][0] for b in betas], _smallest_log_ratio)
    ours = ", ".join(f"beta {b:g}: late mean k {m:.4g}" for b, m in zip(betas, means, strict=True))
    claims.judge(CLAIMS["fig7_k"], ours, ds, anchor, ran, interval)


def _smallest_log_ratio(*groups) -> float:
    """min over consecutive betas of log(mean k at the smaller beta / mean k at the next)."""
    logs = [float(np.log(np.mean(g))) for g in groups]
    return min(a - b for a, b in zip(logs, logs[1:], strict=False))


def judge_cross(
    replays: pd.DataFrame, matrix: pd.DataFrame, claims: ClaimRows, ds: str, anchor: str
) -> Claim:
    """Fig. 7's cross-application: the sequence learned at a beta does best at that beta.

    Parameters
    ----------
    replays
        The data set's replays of learned sequences, with their values at the budget.
    matrix
        Their :func:`cross_matrix`; empty: the claim is not measured here.
    claims
        Where the row goes (and, per beta, the best sequence's accuracy gain over the worst
        behind the headline).
    ds, anchor
        The data set and the page's anchor of the comparison.

    Returns
    -------
    Claim
        The row.
    """
    claim = CLAIMS["fig7_cross"]
    if matrix.empty:
        return claims.judge(
            claim,
            "no replayed sequences (k_control: sequence) in these results",
            ds,
            anchor,
            Ran(),
            None,
        )
    wins, cols = diagonal_wins(matrix)
    ids = list(replays["run_id"])
    ran = ran_of(replays, claims.reading.kind, (), rounds_at_budget(replays, ids), claim)
    cells = _cells(replays, "loss")
    ran = replace(ran, seeds=min((len(v) for v in cells.values()), default=0))
    interval = _diagonal_interval(cells) if cols else None
    row = claims.judge(
        claim, f"diagonal lowest in {wins} of {cols} columns", ds, anchor, ran, interval
    )
    for beta, gain in _sequence_gains(_cells(replays, "accuracy")).items():
        where = f"best vs worst sequence, {ds}, beta = {beta:g}"
        claims.gains.append(_Gain(gain, claim, ran, where))
    return row


def _cells(replays: pd.DataFrame, column: str) -> dict[tuple[float, float], np.ndarray]:
    """Per (beta run at, beta learned at): the replays' per-seed ``column`` (NaN left out)."""
    out = {}
    rep = replays.dropna(subset=["learned_at"])
    for (beta, learned), cell in rep.groupby(["exchange_time", "learned_at"]):
        values = cell[column].to_numpy(float)
        values = values[~np.isnan(values)]
        if len(values):
            out[(float(beta), float(learned))] = values
    return out


def _diagonal_interval(cells: dict) -> Interval | None:
    """The smallest margin, over the columns with their own sequence and another, by which
    another sequence's mean loss exceeds the one learned at the column's beta, with a 95 %
    bootstrap interval over each cell's seeds."""
    cols = {b for b, learned in cells if (b, b) in cells and learned != b}
    keys = [key for key in cells if key[0] in cols]
    if not keys:
        return None

    def smallest(*groups):
        means = {key: float(np.mean(g)) for key, g in zip(keys, groups, strict=True)}
        return min(means[(b, lo)] - means[(b, b)] for b, lo in keys if lo != b)

    return statistic_interval([cells[k] for k in keys], smallest)


def _sequence_gains(cells: dict) -> dict[float, Interval]:
    """Per beta replayed at with two sequences or more: the best sequence's relative accuracy
    gain over the worst's, with its bootstrap interval."""
    out = {}
    for beta in sorted({b for b, _ in cells}):
        groups = [v for (b, _), v in cells.items() if b == beta]
        if len(groups) < 2 or min(float(np.mean(g)) for g in groups) <= 0:
            continue
        gain = statistic_interval(groups, _best_over_worst)
        if gain is not None:
            out[beta] = gain
    return out


def _best_over_worst(*groups) -> float:
    means = [float(np.mean(g)) for g in groups]
    return max(means) / min(means) - 1 if min(means) > 0 else float("nan")


def gains_table(claims: ClaimRows) -> pd.DataFrame:
    """The comparisons behind the headline in this reading (``claims.gains``), largest gain
    first: the relative accuracy gain, its 95 % interval, the comparison and whether its
    runs meet its claim's setting."""
    met = [g for g in claims.gains if claims.met(g.source, g.ran)]
    frame = pd.DataFrame(
        {
            "relative accuracy gain": [g.gain.value for g in claims.gains],
            "95 % interval": [g.gain.text(pct) for g in claims.gains],
            "comparison": [g.where for g in claims.gains],
            "at the paper's setting": ["yes" if g in met else "no" for g in claims.gains],
        }
    )
    return frame.sort_values("relative accuracy gain", ascending=False)


def judge_headline(claims: ClaimRows, anchor: str) -> None:
    """ "Up to 40 %": the largest relative accuracy gain of the comparisons that meet their
    claim's setting (FAB-top-k over its worst baseline, Algorithm 3 over the worst controller,
    the best replayed sequence over the worst), judged against that comparison's setting; with
    none at its setting, the largest gain of them all, not at the paper's setting; with no
    comparison, not measured (against Fig. 4's setting).

    Parameters
    ----------
    claims
        Where the row goes, holding this reading's comparisons (``gains``).
    anchor
        The headline's anchor on the page.
    """
    claim = CLAIMS["headline"]
    if not claims.gains:
        setting = claims.setting(CLAIMS["fig4_accuracy"], Ran())
        ours = "no comparison at a fixed time here"
        claims.judge(claim, ours, "", anchor, Ran(), None, setting=setting)
        return
    met = [g for g in claims.gains if claims.met(g.source, g.ran)]
    top = max(met or claims.gains, key=lambda g: g.gain.value)
    ours = f"largest gain {top.gain.value:+.1%} ({top.where})"
    if not met:
        ours += f"; none of the {len(claims.gains)} comparisons is at the paper's setting"
    setting = claims.setting(top.source, top.ran)
    claims.judge(claim, ours, top.where, anchor, top.ran, top.gain, setting=setting, fmt=pct)
