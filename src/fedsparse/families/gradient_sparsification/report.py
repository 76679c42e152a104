"""The report's page for adaptive gradient sparsification (FAB-top-k and the online choice of
k): loss and test accuracy against normalised time for every method and k controller,
the k_m trajectories, the fairness view, the cross-application matrix of replayed k sequences,
and the paper's section-6 claims checked one by one.

Every comparison is at a fixed time budget (the paper's x-axis): per data set and exchange time
beta, the largest time every compared run reached; a method's value is its best configuration's
(step size, batch size, ...) mean over seeds, interpolated at the budget. Loss is the training
loss without the l2 term (train_loss), accuracy the test accuracy. FedAvg appears only on data
sets that also have gradient-sparsification runs.

A comparison at a budget is scored only when the runs compared cover the horizon its claim
needs within the budget: periodic-k's run ``CYCLES`` cycles of ceil(D/k) rounds where Fig. 4
compares FAB-top-k with it, Algorithm 3's runs the horizon T of the authors' bandits for Figs.
5-7; otherwise the row says "too short to tell" with the horizon it would need.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from ...report.analysis import slugify
from ...report.claims import (
    AGREES,
    AUTHORS_CODE,
    DISAGREES,
    NOT_MEASURED,
    PAPER_CLAIM,
    PAPER_TEXT,
    VARIATION,
    Claim,
    Family,
    Reading,
    in_reading,
    reading_of,
    verdict_of,
)
from ...report.data import ReportData, as_data, partitions_of
from ...report.figures import plt
from ...report.page import Page
from ...results import sql_ident
from .controllers import HORIZON

__all__ = ["FAMILY", "build"]

PAPER = "Han, Wang, Leung: Adaptive Gradient Sparsification for Efficient FL (ICDCS 2020)"
GS = ("fabtopk", "utopk", "fubtopk", "periodick", "sendall")
CONTROLLERS = ("online_extended", "online", "value_ogd", "exp3", "bandit")
HEADLINE = 0.40  # "up to 40 % improvement in model accuracy for a finite training time"
SIMILAR = 0.10  # FUB "similar" to FAB: losses within 10 % of each other
# The horizon a comparison needs before it is scored. Fig. 4 against periodic-k: its run must
# cover CYCLES cycles of ceil(D/k) rounds within the budget (the first cycle pays out the
# residuals backlogged since round 0, so one or two cycles show a transient, not the rate).
# Figs. 5-7: Algorithm 3's runs must cover CONTROLLER_HORIZON rounds, the horizon T the authors'
# code gives its bandits (5780; the spec reads it as the paper's figures' range). Module
# constants, read at each build.
CYCLES = 3
CONTROLLER_HORIZON = HORIZON
TOO_SHORT = "too short to tell"
TUNED = ["stepsize", "batch_size", "k", "local_steps", "k_min", "k_max", "window", "expand"]


# ---- readings: the paper's setting with a network standing in for its CNN -----------------

# The paper: FEMNIST, 156 writers, a CNN with D = 444,062 and k = 1000 (k/D = 0.225 %),
# aggregation weights C_i / C. A run is in the paper's reading when it keeps those choices with a
# network model in place of the CNN; the k/D test applies to fixed-k runs only (an online
# controller's k is its starting point; sendall and FedAvg have no k).
K_OVER_D = (0.001, 0.005)
MANY_CLIENTS = 100
IMAGE_FEATURES = {"idx": (784, 10), "leaf": (784, 62)}  # (features, classes) under softmax


def n_params(config: dict) -> int | None:
    """The model's number of parameters D from a run's config (None when the data set's
    dimensions are not known without its files)."""
    from ...data.registry import DATASETS

    ds, model = config.get("dataset") or {}, config.get("model") or {}
    kind = ds.get("kind")
    if kind in IMAGE_FEATURES:
        d, classes = IMAGE_FEATURES[kind]
    elif kind == "synthetic":
        d, classes = ds.get("dim"), 10
    elif kind == "svmlight" and ds.get("source") in DATASETS:  # cifar10, mnist: 10 classes
        d, classes = DATASETS[ds["source"]].n_features, 10
    else:
        return None
    if d is None:
        return None
    out = classes if model.get("loss") == "softmax" else 1
    bias = bool(model.get("bias", model.get("kind") in ("mlp", "cnn")))
    if model.get("kind") == "cnn":
        from ...model import resolve

        shapes = [layer.params for layer in resolve(model, int(d), out) if layer.params]
        return int(sum(o * i + (o if bias else 0) for o, i in shapes))
    sizes = [int(d), *(model.get("hidden") or []), out] if model.get("kind") == "mlp" else [d, out]
    return int(sum(a * b + (b if bias else 0) for a, b in zip(sizes, sizes[1:], strict=False)))


def _papers_setting_cnn(config: dict) -> bool:
    return (config.get("model") or {}).get("kind") == "cnn" and _papers_setting(config)


def _authors_code(config: dict) -> bool:
    """The authors' code's reading: its deal of the writers (partition writer_mix), its
    charge of periodic-k (charge authors_code) and its k controllers (k_rules authors_code),
    in the paper's setting otherwise."""
    part, params = config.get("partition"), config.get("params") or {}
    if not (isinstance(part, dict) and part.get("kind") == "writer_mix"):
        return False
    if config.get("algorithm") == "periodick" and params.get("charge") != "authors_code":
        return False
    if params.get("k_control") in CONTROLLERS and params.get("k_rules") != "authors_code":
        return False
    return _papers_setting(config, ("writer_mix",))


def _papers_setting(config: dict, kinds: tuple[str, ...] = ("dirichlet", "one_class")) -> bool:
    model, params = config.get("model") or {}, config.get("params") or {}
    code = params.get("charge") == "authors_code" or params.get("k_rules") == "authors_code"
    if code and "writer_mix" not in kinds:
        return False  # periodic-k charged, or k chosen, as the code does: not the text's
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
        "code's U_top_K is our fubtopk (a top-k downlink of the "
        "union); an MLP for its CNN.",
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
RUN_COLUMNS = ("run_id", "dataset", "algorithm", "seed", "exchange_time", "k_control", "fill")
PARTS = ("fixed", "online", "replay")  # the comparisons a run can be in


def gs_runs(source: ReportData | str | Path) -> pd.DataFrame:
    """One row per ok run of the family, and per fedavg run on a data set that has family runs
    (those with trace rows), by run id: identity and hyperparameters, ``method`` (algorithm and
    k controller), ``reading``, ``pos`` (its place in the results, the traces' order) and from
    its trace ``t_end`` and ``r_end`` (its last time and round), ``D`` (its parameters, None
    when unknown from the config), ``k_rows`` (rows with a k_m) and ``test_rows`` (rows
    with a test accuracy)."""
    data = as_data(source)
    family = ", ".join(f"'{a}'" for a in GS)
    cols = ", ".join(f"r.{sql_ident(c)}" for c in dict.fromkeys([*RUN_COLUMNS, *TUNED]))
    runs = data.frame(
        f"SELECT {cols}, t.t_end, t.r_end, t.k_rows, t.test_rows FROM runs r JOIN ("
        "SELECT run_id, max(time) FILTER (WHERE NOT isnan(time)) AS t_end, "
        "max(round) FILTER (WHERE NOT isnan(time)) AS r_end, "
        "count(k_used) AS k_rows, "
        "count(test_accuracy) FILTER (WHERE NOT isnan(test_accuracy)) AS test_rows "
        f"FROM traces WHERE algorithm IN ({family}, 'fedavg') GROUP BY run_id) t "
        "ON r.run_id = t.run_id "
        f"WHERE r.status = 'ok' AND (r.algorithm IN ({family}) OR (r.algorithm = 'fedavg' AND "
        f"r.dataset IN (SELECT dataset FROM runs WHERE algorithm IN ({family})))) "
        "ORDER BY r.run_id"
    )
    if runs.empty:
        return runs
    runs["method"] = [
        _method(r)
        for r in runs[["algorithm", "k_control", "fill", "local_steps"]].itertuples(index=False)
    ]
    runs["t_end"] = runs["t_end"].astype(float)
    order = data.run_frame(["run_id"])["run_id"]
    runs["pos"] = pd.Series(range(len(order)), index=order).reindex(runs["run_id"]).to_numpy()
    configs = data.configs(runs["run_id"])
    runs["reading"] = [reading_of(READINGS, configs[str(r)]).name for r in runs["run_id"]]
    runs["D"] = [n_params(configs[str(r)]) for r in runs["run_id"]]
    return runs


def _method(row) -> str:
    algorithm, control, fill, local_steps = row
    if algorithm == "fedavg":
        return f"fedavg (tau={local_steps})"
    name = algorithm if pd.isna(control) or control == "fixed" else f"{algorithm} {control}"
    return name + (" fill=aggregate" if fill == "aggregate" else "")


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
        last such row is more than 1e-9 before the budget); one row per run."""
        chosen = runs.loc[runs["budget"].notna(), ["run_id", "budget"]]
        chosen = chosen.assign(lim=chosen["budget"] - 1e-9)
        parts = [
            _interpolated(name, y) for name, y in (("loss", LOSS), ("accuracy", self.accuracy))
        ]
        aggregates = ", ".join(a for found, _ in parts for a in found)
        values = ", ".join(v for _, v in parts)
        return self.data.frame_with(
            f"SELECT run_id, {values} FROM (SELECT t.run_id, any_value(b.budget) AS budget, "
            f"any_value(b.lim) AS lim, {aggregates} FROM traces t JOIN _budgets b "
            f"ON t.run_id = b.run_id WHERE {partitions_of(runs)} AND t.time IS NOT NULL "
            "GROUP BY t.run_id) ORDER BY run_id",
            _budgets=chosen,
        )

    def rows(self, runs: pd.DataFrame, k_only: bool = False) -> pd.DataFrame:
        """The trace rows of ``runs`` in the results' order: run_id, round, time, loss,
        accuracy, k_used (``k_only``: only the rows with a k_m)."""
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
    """Per run of ``run_ids`` and client, the totals the run stored (runs.parquet
    ``client_summary``): elements of the client's offer applied, per round, and the rounds with
    none applied."""
    runs = as_data(source).client_summaries_of(run_ids)
    frames = [
        pd.DataFrame(json.loads(text)).assign(run_id=rid)
        for rid, text in zip(runs["run_id"], runs["client_summary"], strict=True)
    ]
    cols = ["run_id", "client", "applied", "applied_per_round", "idle_rounds"]
    return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)


def contribution_table(best: pd.DataFrame, contributions: pd.DataFrame) -> pd.DataFrame:
    """Per client, for each method's best configuration (mean over its seeds): elements applied
    per round and rounds with nothing applied."""
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
    """``runs`` with ``part`` (the comparison a run is in: fixed k, online k, or a replay of a
    learned sequence whose source is here), ``learned_at`` (a replay's source beta) and
    ``budget``: its comparison's fixed time budget, the largest time every run of the same
    reading, data set, part and beta reached."""
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
    """Per method: the configuration with the lowest mean loss at the budget (``runs``: one row
    per run with its ``loss`` and ``accuracy`` there), its mean loss and accuracy there and its
    runs (seeds)."""
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
    cfg = cfg.dropna(subset=["loss"])
    return cfg.loc[cfg.groupby("method")["loss"].idxmin()].reset_index(drop=True)


def cross_matrix(replays: pd.DataFrame, column: str = "loss") -> pd.DataFrame:
    """Rows: the beta a sequence was learned at; columns: the beta it was replayed at; cell:
    the mean ``column`` (NaN-skipping) of those replays at the column's budget. ``replays``:
    one row per replay, with ``learned_at``, ``exchange_time`` and ``column`` at its budget."""
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
    """Per fixed-k method: the smallest |J ∩ J_i| seen, how often some client had nothing
    applied, and the FAB floor floor(k / N) (``counts``: :meth:`GsTraces.fairness`)."""
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


# ---- the page -----------------------------------------------------------------------------


def _curves_figure(rows: pd.DataFrame, best: pd.DataFrame, budget: float, title: str):
    """Loss and accuracy against time of each best configuration, mean over its runs' rows
    (``rows``: :meth:`GsTraces.rows` of those runs)."""
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


def _k_runs(reader: GsTraces, runs: pd.DataFrame) -> pd.DataFrame:
    """The k_m trajectories the figure draws: per beta and k controller (or replay), one run,
    the first in the results with k_m values; its rows with a k_m, with method and beta."""
    online = runs[runs["k_control"].isin([*CONTROLLERS, "sequence"]) & (runs["k_rows"] > 0)]
    first = online.sort_values("pos").groupby(["exchange_time", "method"]).head(1)
    if first.empty:
        return pd.DataFrame()
    rows = reader.rows(first, k_only=True)[["run_id", "round", "k_used"]]
    return rows.merge(first[["run_id", "method", "exchange_time"]], on="run_id")


def _k_figure(rows: pd.DataFrame, title: str):
    """k_m against rounds, a panel per beta (``rows``: :func:`_k_runs`)."""
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


def _fairness_figure(counts: pd.DataFrame, title: str):
    """FAB's and FUB's fairness view against rounds, mean over their runs (``counts``:
    :meth:`GsTraces.fairness`)."""
    fixed = counts[counts["method"].isin(["fabtopk", "fubtopk"])]
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


class _Claims:
    """Collects the page's Claim rows, each in the reading being measured (``reading``)."""

    def __init__(self):
        self.rows: list[Claim] = []
        self.reading: Reading = READINGS[-1]
        self.short: list[str] = []  # headline comparisons left out as too short (this reading)

    def add(self, claim: str, ours: str, verdict: str, where: str, anchor: str, value="", short=""):
        """One row; ``short`` (:func:`horizon_short`'s text) makes it "too short to tell"."""
        if short:
            ours, verdict = f"{TOO_SHORT}: {short}; at this budget: {ours}", NOT_MEASURED
        found = Claim(PAPER, claim, value, ours, verdict, where, anchor)
        self.rows += in_reading([found], self.reading)


def rounds_at_budget(runs: pd.DataFrame, run_ids: list[str]) -> float:
    """The fewest rounds any run of ``run_ids`` (rows of ``runs`` with ``budget``, ``t_end``
    and ``r_end``) ran within its budget: its rounds scaled by budget / its last time, exact
    at a constant time per round (fixed k)."""
    mine = runs[runs["run_id"].isin(run_ids)]
    share = (mine["budget"] / mine["t_end"].where(mine["t_end"] > 0)).clip(upper=1.0).fillna(1.0)
    return float((mine["r_end"] * share).min()) if len(mine) else 0.0


def horizon_short(covered: float, need: int, why: str, who: str, within: str = "") -> str:
    """'' when ``who`` covered the ``need``ed rounds, else what the row says."""
    if covered >= need:
        return ""
    within = within or "within the budget"
    return f"{who} cover {covered:,.0f} rounds {within}, the claim needs {need:,} ({why})"


def periodic_horizon(runs: pd.DataFrame, best: pd.DataFrame) -> tuple[str, str]:
    """Fig. 4's horizon where it compares with periodic-k: ('' when its best configuration's
    runs cover CYCLES cycles of ceil(D / k) rounds within the budget, else what the row says;
    the page's sentence on it). ('', '') without periodic-k or a known D."""
    mine = best[best["method"] == "periodick"]
    ids = _run_ids(mine)
    D = runs.loc[runs["run_id"].isin(ids), "D"].dropna()
    if mine.empty or D.empty or pd.isna(mine["k"].iloc[0]):
        return "", ""
    cycle = math.ceil(float(D.max()) / float(mine["k"].iloc[0]))
    need, why = CYCLES * cycle, f"{CYCLES} periodic-k cycles of ceil(D/k) = {cycle:,} rounds"
    short = horizon_short(rounds_at_budget(runs, ids), need, why, "periodic-k's runs")
    said = f"Horizon: the comparison with periodic-k is scored when its runs cover {need:,} "
    said += f"rounds within the budget ({why})"
    return short, said + (f"; {TOO_SHORT} here: {short}." if short else "; they do.")


def controller_horizon(
    runs: pd.DataFrame, ids: list[str], within: str = "", who: str = "Algorithm 3's runs"
) -> str:
    """'' when ``who``, the runs ``ids``, cover CONTROLLER_HORIZON rounds (within the budget,
    or ``within``: where else they are counted), else what the row says."""
    why = f"the horizon T = {CONTROLLER_HORIZON:,} rounds the authors' code gives its bandits"
    covered = (
        rounds_at_budget(runs, ids)
        if not within
        else float(runs.loc[runs["run_id"].isin(ids), "r_end"].min())
    )
    return horizon_short(covered, CONTROLLER_HORIZON, why, who, within)


def _compare(best: pd.DataFrame, a: str, others: list[str], column: str) -> tuple[bool | None, str]:
    """Whether method ``a`` beats every one of ``others`` on ``column`` (loss: lower); None
    (not measured) when a value is missing, e.g. no accuracy for this data set."""
    v = dict(zip(best["method"], best[column], strict=True))
    better = (lambda x, y: x < y) if column == "loss" else (lambda x, y: x > y)
    text = ", ".join(f"{m} {v[m]:.4g}" for m in [a, *others])
    if any(pd.isna(v[m]) for m in [a, *others]):
        return None, text + f" (no {column} for some of them)"
    return all(better(v[a], v[m]) for m in others), text


def _fixed_section(page, reader, runs, ds, slug, n_clients, claims, tables, headline):
    """Fig. 4: every method at fixed k, per beta (``runs``: the data set's, with their values
    at the budget)."""
    for beta, at in runs[runs["part"] == "fixed"].groupby("exchange_time"):
        anchor = f"gs-{slug}-fixed-{beta:g}"
        page.heading("h3", f"Every method at fixed k, beta = {beta:g}", anchor)
        budget = float(at["budget"].iloc[0])
        best = best_configs(at)
        page.text("p", f"Time budget {budget:.4g}; each method at its best configuration.", "muted")
        shown = best.drop(columns=["runs"]).dropna(axis=1, how="all")
        page.table(shown)
        best.drop(columns=["runs"]).assign(dataset=ds, beta=beta).to_csv(
            tables / f"gs_fixed_{slug}_{beta:g}.csv", index=False
        )
        rows = reader.rows(at[at["run_id"].isin(_run_ids(best))])
        page.figure(
            _curves_figure(rows, best, budget, f"{ds}, beta = {beta:g}: fixed k"),
            f"gs-{slug}-fixed-{beta:g}",
            "loss and accuracy against time",
        )
        methods = set(best["method"])
        ks = ", ".join(str(int(k)) for k in sorted(set(best.get("k", pd.Series()).dropna())))
        where = f"{ds}, beta = {beta:g}, k = {ks}"
        short, said = periodic_horizon(at, best)
        if said:
            page.text("p", said, "muted")
        authors = claims.reading.kind == AUTHORS_CODE
        # the authors' code's U_top_K is a top-k downlink of the union: our fubtopk
        u_top_k = "fubtopk" if authors else "utopk"
        rivals = (u_top_k, "periodick", "fedavg", "sendall")
        baselines = [m for m in best["method"] if m.split(" ")[0] in rivals]
        if "fabtopk" in methods and baselines:
            named = " (fubtopk: the code's U_top_K)" if authors and "fubtopk" in methods else ""
            for column, what in (("loss", "loss"), ("accuracy", "test accuracy")):
                ok, text = _compare(best, "fabtopk", baselines, column)
                claims.add(
                    f"FAB-top-k has a better {what} at a fixed time than U-top-k, "
                    "periodic-k, FedAvg and always-send-all (Fig. 4)",
                    text + named,
                    verdict_of(ok),
                    where,
                    anchor,
                    short=short,
                )
            fab = best.set_index("method").loc["fabtopk"]
            worst = best[best["method"].isin(baselines)]["accuracy"].min()
            if worst > 0 and not short:
                headline.append((fab["accuracy"] / worst - 1, f"FAB vs worst baseline, {where}"))
            elif worst > 0:
                claims.short.append(f"FAB vs worst baseline, {where}: {short}")
        fedavg = [m for m in best["method"] if m.startswith("fedavg")]
        if "fabtopk" in methods and fedavg:
            ok, text = _compare(best, "fabtopk", fedavg, "loss")
            claims.add(
                "FAB-top-k beats FedAvg at equal average communication (Fig. 4)",
                text,
                verdict_of(ok),
                where,
                anchor,
            )
        if authors and "fabtopk" in methods:
            claims.add(
                "FUB-top-k is similar to FAB-top-k in loss (Fig. 4)",
                "the authors' code's FUB_top_K merges the offers pairwise up a tree, a top-k at "
                "each merge; not run here (fubtopk plays the code's U_top_K in this reading)",
                NOT_MEASURED,
                where,
                anchor,
            )
        elif {"fabtopk", "fubtopk"} <= methods:
            v = best.set_index("method")["loss"]
            gap = abs(v["fubtopk"] / v["fabtopk"] - 1)
            claims.add(
                "FUB-top-k is similar to FAB-top-k in loss (Fig. 4)",
                f"FUB/FAB loss ratio {v['fubtopk'] / v['fabtopk']:.3f} (similar: within "
                f"{SIMILAR:.0%})",
                verdict_of(gap <= SIMILAR),
                where,
                anchor,
            )
        counts = reader.fairness(at[at["algorithm"] != "fedavg"])
        _fairness(page, counts, ds, slug, beta, n_clients, claims, tables, where)
        per_client = contribution_table(best, client_contributions(reader.data, _run_ids(best)))
        if not per_client.empty:
            per_client.assign(dataset=ds, beta=beta).to_csv(
                tables / f"gs_clients_{slug}_{beta:g}.csv", index=False
            )
            page.add("<details><summary>Per-client contributions (mean over seeds)</summary>")
            page.table(per_client, {c: (lambda v: f"{v:.3g}") for c in per_client.columns[1:]})
            page.add("</details>")


def _run_ids(best: pd.DataFrame) -> list[str]:
    """The runs of ``best``'s configurations."""
    return [rid for runs in best["runs"] for rid in runs]


def _fairness(page, counts, ds, slug, beta, n_clients, claims, tables, where):
    """The fairness table, figure and claims at one beta (``counts``: the fixed-k runs'
    :meth:`GsTraces.fairness`)."""
    anchor = f"gs-{slug}-fair-{beta:g}"
    table = fairness_table(counts, n_clients)
    if table.empty:
        return
    page.heading("h3", f"Fairness, beta = {beta:g}", anchor)
    page.text(
        "p",
        "Per evaluated round (the trace keeps the fairness view of the round that "
        "produced each evaluated model): min over clients of |J ∩ J_i| and the clients "
        "with none of their offer applied.",
        "muted",
    )
    page.table(table)
    table.assign(dataset=ds, beta=beta).to_csv(tables / f"gs_fair_{slug}_{beta:g}.csv", index=False)
    page.figure(
        _fairness_figure(counts, f"{ds}, beta = {beta:g}: fairness"),
        f"gs-{slug}-fair-{beta:g}",
        "fairness view",
    )
    several = table.groupby("method")["k"].nunique().max() > 1  # a claim per k when swept
    for _, fab in table[table["method"] == "fabtopk"].iterrows():
        at_k = f"{where} (k = {fab['k']:g})" if several else where
        floor = fab["floor k/N"] if pd.notna(fab["floor k/N"]) else 0
        ok = fab["max idle clients"] == 0 and fab["min |J ∩ J_i|"] >= floor
        claims.add(
            "FAB-top-k: every client contributes elements every round (|J ∩ J_i| >= "
            "floor(k/N)) (Fig. 4)",
            f"min |J ∩ J_i| = {fab['min |J ∩ J_i|']} (floor "
            f"{floor}), max idle clients {fab['max idle clients']}",
            verdict_of(ok),
            at_k,
            anchor,
        )
    for _, fub in table[table["method"] == "fubtopk"].iterrows():
        at_k = f"{where} (k = {fub['k']:g})" if several else where
        idle = fub["max idle clients"] > 0
        claims.add(
            "FUB-top-k can ignore some clients entirely (Fig. 4)",
            f"up to {fub['max idle clients']} idle clients; rounds with one: "
            f"{fub['rounds with an idle client']}"
            if idle
            else "no client was left out at the evaluated rounds",
            verdict_of(idle),
            at_k,
            anchor,
        )


def _controller_section(page, reader, runs, ds, slug, claims, tables, headline):
    """Figs. 5-7: the k controllers, per beta, and the replayed sequences."""
    fig = _k_figure(_k_runs(reader, runs), f"{ds}: k_m trajectories")
    if fig is not None:
        page.heading("h3", "k_m trajectories", f"gs-{slug}-k")  # claims link here
    page.figure(fig, f"gs-{slug}-k", "k_m trajectories")
    lates, late_runs = {}, []
    for beta, at in runs[runs["part"] == "online"].groupby("exchange_time"):
        anchor = f"gs-{slug}-online-{beta:g}"
        page.heading("h3", f"k chosen online, beta = {beta:g}", anchor)
        budget = float(at["budget"].iloc[0])
        best = best_configs(at)
        rows = reader.rows(at[at["run_id"].isin(_run_ids(best))])
        best["k stability"] = [k_stability(rows[rows["run_id"].isin(r)]) for r in best["runs"]]
        best["late mean k"] = [late_k(rows[rows["run_id"].isin(r)]) for r in best["runs"]]
        by = best.set_index("method")
        alg3 = [m for m in by.index if m.endswith("online_extended")]
        short = controller_horizon(at, [r for m in alg3 for r in by.loc[m, "runs"]])
        page.text(
            "p",
            f"Time budget {budget:.4g}. k stability: std of log k_m over the second "
            "half of the evaluated rounds (lower: steadier). Horizon: the controllers' claims "
            f"are scored when Algorithm 3's runs cover {CONTROLLER_HORIZON:,} rounds within "
            "the budget" + (f"; {TOO_SHORT} here: {short}." if short else "; they do."),
            "muted",
        )
        page.table(best.drop(columns=["runs"]).dropna(axis=1, how="all"))
        best.drop(columns=["runs"]).assign(dataset=ds, beta=beta).to_csv(
            tables / f"gs_online_{slug}_{beta:g}.csv", index=False
        )
        page.figure(
            _curves_figure(rows, best, budget, f"{ds}, beta = {beta:g}: online k"),
            f"gs-{slug}-online-{beta:g}",
            "loss and accuracy, online k",
        )
        where = f"{ds}, beta = {beta:g}"
        for a3 in alg3:
            lates[beta] = by.loc[a3, "late mean k"]
            late_runs += by.loc[a3, "runs"]
            algo = a3.split(" ")[0]
            others = ("value_ogd", "exp3", "bandit")
            rivals = [f"{algo} {c}" for c in others if f"{algo} {c}" in by.index]
            if rivals:
                ok, text = _compare(best, a3, rivals, "loss")
                claims.add(
                    "Algorithm 3 has a better loss than value-based OGD, EXP3 and the "
                    "continuous bandit (Fig. 5)",
                    text,
                    verdict_of(ok),
                    where,
                    anchor,
                    short=short,
                )
                jumpy = [r for r in rivals if not r.endswith("value_ogd")]
                if jumpy:
                    stability = by["k stability"]
                    steady = all(stability[a3] < stability[r] for r in jumpy)
                    text = ", ".join(f"{m} {stability[m]:.3g}" for m in [a3, *jumpy])
                    claims.add(
                        "Algorithm 3's k_m is more stable than EXP3's and the continuous "
                        "bandit's (Fig. 5)",
                        f"std of log k_m: {text}",
                        verdict_of(steady),
                        where,
                        anchor,
                        short=short,
                    )
                worst = by.loc[rivals, "accuracy"].min()
                if worst > 0 and short:
                    claims.short.append(f"Algorithm 3 vs worst controller, {where}: {short}")
                elif worst > 0:
                    gain = by.loc[a3, "accuracy"] / worst - 1
                    headline.append((gain, f"Algorithm 3 vs worst controller, {where}"))
            a2 = f"{algo} online"
            if a2 in by.index:
                ok, text = _compare(best, a3, [a2], "loss")
                steady = by.loc[a3, "k stability"] < by.loc[a2, "k stability"]
                claims.add(
                    "Algorithm 3 beats Algorithm 2 in loss, with less fluctuation in k_m "
                    "(Fig. 6, where the paper shows beta = 100)",
                    f"{text}; std of log k_m "
                    f"{by.loc[a3, 'k stability']:.3g} vs {by.loc[a2, 'k stability']:.3g}",
                    verdict_of(ok and steady),
                    where,
                    anchor,
                    short=short,
                )
    if len(lates) >= 2:
        betas = sorted(lates)
        ok = all(lates[a] >= lates[b] for a, b in zip(betas, betas[1:], strict=False))
        claims.add(
            "Algorithm 3 learns a larger k_m for a smaller beta (Fig. 7)",
            ", ".join(f"beta {b:g}: late mean k {lates[b]:.4g}" for b in betas),
            verdict_of(ok),
            ds,
            f"gs-{slug}-k",
            short=controller_horizon(runs, late_runs, "in all (the late k: their second half's)"),
        )


def _cross_section(page, runs, ds, slug, claims, tables, headline):
    """Fig. 7's cross-application: each learned sequence replayed at each beta."""
    replays = runs[runs["part"] == "replay"]
    matrix = cross_matrix(replays)
    anchor = f"gs-{slug}-cross"
    if matrix.empty:
        claims.add(
            "The k sequence learned at beta is the best sequence at beta (Fig. 7)",
            "no replayed sequences (k_control: sequence) in these results",
            NOT_MEASURED,
            ds,
            f"gs-{slug}",
        )
        return
    page.heading("h3", "Cross-application of the learned k sequences", anchor)
    page.text(
        "p",
        "Rows: the beta a k sequence was learned at (Algorithm 3's run); columns: "
        "the beta it was replayed at; cell: the mean training loss at the column's time "
        "budget. The diagonal should be each column's lowest.",
        "muted",
    )
    shown = matrix.reset_index().rename(
        columns=lambda c: f"run at {c:g}" if isinstance(c, float) else c
    )
    page.table(shown)
    matrix.to_csv(tables / f"gs_cross_{slug}.csv")
    wins, cols = diagonal_wins(matrix)
    short = controller_horizon(replays, list(replays["run_id"]), who="the replays")
    claims.add(
        "The k sequence learned at beta is the best sequence at beta (Fig. 7)",
        f"diagonal lowest in {wins} of {cols} columns",
        verdict_of(wins == cols) if cols else NOT_MEASURED,
        ds,
        anchor,
        short=short if cols else "",
    )
    acc = cross_matrix(replays, "accuracy")
    for beta in acc.columns:
        col = acc[beta].dropna()
        if len(col) > 1 and col.min() > 0 and short:
            claims.short.append(f"best vs worst sequence, {ds}, beta = {beta:g}: {short}")
        elif len(col) > 1 and col.min() > 0:
            gain = col.max() / col.min() - 1
            headline.append((gain, f"best vs worst sequence, {ds}, beta = {beta:g}"))


def build(page: Page, data: ReportData, tables: Path) -> list[Claim]:
    """Write the family's page; return the paper's section-6 claims as measured here."""
    data = as_data(data)  # a results folder will do outside a build
    runs = gs_runs(data)
    claims = _Claims()
    page.text("p", __doc__.split("\n\n", 1)[0].replace("\n", " "), "muted")
    page.text(
        "p",
        "The paper trains a CNN on FEMNIST (156 writers); a stand-in (e.g. a linear "
        "softmax or MLP on Fashion-MNIST with a writer-like non-IID partition) compares "
        "only qualitatively: orderings, trends in beta, fairness.",
        "note",
    )
    said = " ".join(f"{r.name} ({r.kind}): {r.description}" for r in READINGS)
    page.text("p", "Readings, recognised from each run's config. " + said, "muted")
    if runs.empty:
        return []
    clients = client_counts(data)
    reader = GsTraces(data, runs)
    runs = with_budgets(runs, replay_sources(data))
    values = reader.at_budget(runs)
    runs = runs.merge(values, on="run_id", how="left")
    by_name = {r.name: r for r in READINGS}
    several = runs.groupby("dataset")["reading"].nunique() > 1
    for reading in READINGS:  # the paper's reading first
        claims.reading, claims.short = reading, []
        headline: list[tuple[float, str]] = []
        mine = runs[runs["reading"] == reading.name]
        for ds, rows in mine.groupby("dataset", sort=True):
            slug = slugify(ds)
            title = ds
            if several[ds]:  # one section per reading of this data set
                slug += f"-{READINGS.index(by_name[reading.name])}"
                title = f"{ds}: {reading.name}"
            page.heading("h2", title, f"gs-{slug}")
            page.text("p", f"Reading {reading.name} ({reading.kind}).", "muted")
            n_clients = clients.get(ds)
            _fixed_section(page, reader, rows, ds, slug, n_clients, claims, tables, headline)
            _controller_section(page, reader, rows, ds, slug, claims, tables, headline)
            _cross_section(page, rows, ds, slug, claims, tables, headline)
        if len(mine):  # the index says when the paper's reading has no runs (only_in_variations)
            _headline(page, claims, headline, reading)
    pd.DataFrame([vars(c) for c in claims.rows]).to_csv(tables / "gs_claims.csv", index=False)
    return claims.rows


def _headline(page, claims: _Claims, headline: list[tuple[float, str]], reading) -> None:
    anchor = f"gs-headline-{READINGS.index(reading)}"
    page.heading("h2", f"Headline: accuracy at a fixed training time ({reading.name})", anchor)
    claim = "Up to 40 % higher model accuracy for a finite training time (abstract)"
    if not headline and claims.short:
        first = claims.short[0]
        more = f" (and {len(claims.short) - 1} more)" if len(claims.short) > 1 else ""
        ours = f"{TOO_SHORT}: every comparison is too short: {first}{more}"
        claims.add(claim, ours, NOT_MEASURED, "", anchor, "40 %")
        return
    if not headline:
        claims.add(claim, "no comparison at a fixed time here", NOT_MEASURED, "", anchor, "40 %")
        return
    gain, where = max(headline)
    frame = pd.DataFrame(headline, columns=["relative accuracy gain", "comparison"])
    page.table(
        frame.sort_values("relative accuracy gain", ascending=False),
        {"relative accuracy gain": lambda v: f"{v:+.1%}"},
    )
    # "up to 40 %" is a maximum over the paper's settings; ours agrees when our largest gain
    # is of that order (at least half of it) on our stand-in model and data
    ok = gain >= HEADLINE / 2
    ours = f"largest gain {gain:+.1%} ({where}); agrees when >= {HEADLINE / 2:.0%}"
    claims.add(claim, ours, AGREES if ok else DISAGREES, where, anchor, "40 %")


FAMILY = Family(
    key="gs",
    title="Adaptive gradient sparsification (FAB-top-k)",
    paper=PAPER,
    algorithms=frozenset(GS),
    build=build,
    readings=READINGS,
    headline=(
        (
            "FAB-top-k has a better loss at a fixed time than U-top-k, periodic-k, FedAvg and "
            "always-send-all (Fig. 4)",
            "",
            PAPER_CLAIM,
        ),
        (
            "Algorithm 3 has a better loss than value-based OGD, EXP3 and the continuous bandit "
            "(Fig. 5)",
            "",
            PAPER_CLAIM,
        ),
        ("Up to 40 % higher model accuracy for a finite training time (abstract)", "40 %", "paper"),
    ),
    configs="config/gs-quick.yaml",
)
