"""The sFedHP family's analysis: each run's scores read from its traces (SQL), the
configurations' means over seeds, the paper's numbers (Tables I-V) and which of them a data set
is shown against, and the paper's claims judged against the settings they are stated at
(``settings.py``). No HTML and no figures: ``report.py`` writes these into the family's page,
``figures.py`` draws them.

Every number here is a percentage of correctly classified test rows: GM (the global model on
the union of the clients' test rows) and PM (each client's personalised model on its own test
rows), per run the best over the evaluated rounds and the final round's.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from ...algorithms import ALGORITHMS
from ...query.read import sql_ident
from ...report.analysis import best_per_group, slugify
from ...report.claims import (
    AUTHORS_CODE,
    DERIVED,
    INCONCLUSIVE,
    NOT_MEASURED,
    PAPER_TEXT,
    VARIATION,
    Claim,
    Reading,
    in_reading,
    reading_of,
)
from ...report.data import ReportData, as_data
from ...report.evidence import (
    Band,
    Ran,
    Setting,
    about,
    accuracy,
    bootstrap_interval,
    judge,
    ordering,
    score,
    t_interval,
)
from ...results.schema import HYPERPARAMETER_COLUMNS
from .algorithms import FedProx, HeurFedAMP, HierFAVG, PerFedAvg, PFedMe, SFedHP
from .settings import (
    SPARSE_LABEL,
    TABLE_I_LAMBDA,
    TABLE_NAMES,
    best_gm_setting,
    convex_setting,
    data_of,
    hierarchy_setting,
    lambda_setting,
    model_of,
    ran_of,
    row_setting,
    sparse_setting,
)

PAPER = "Liu et al., Sparse Federated Learning with Hierarchical Personalization Models (sFedHP)"
# the family's methods by their declared names (Algorithm.name)
SFEDHP, PFEDME, HIERFAVG = SFedHP.name, PFedMe.name, HierFAVG.name
FEDPROX, PERFEDAVG, HEURFEDAMP = FedProx.name, PerFedAvg.name, HeurFedAMP.name
PERSONALISED = (SFEDHP, PFEDME, HIERFAVG, FEDPROX, PERFEDAVG, HEURFEDAMP)
# the paper's baselines from another family (the fedavg family's FedAvg), by name: a family
# imports no other, and the registry (fedsparse.algorithms) labels and colours them
BASELINES = ("fedavg",)
(FEDAVG,) = BASELINES
PFEDGP = "pfedgp"  # a row of the paper's tables: pFedGP is not implemented
GM_METHODS = (SFEDHP, PFEDME, HIERFAVG, FEDPROX, FEDAVG)  # Table I's methods
# the methods in the paper's tables' order; each shown by its declared label and colour
METHODS = (SFEDHP, PFEDME, FEDAVG, HIERFAVG, FEDPROX, PERFEDAVG, HEURFEDAMP)
# hyperparameters named in a configuration's label (others only when they vary)
LABEL_PARAMS = {
    SFEDHP: ("lambda1", "lambda2", "gamma1", "gamma2"),
    PFEDME: ("lambda",),
    FEDPROX: ("mu",),
    HEURFEDAMP: ("alpha_self",),
    PERFEDAVG: ("stepsize", "inner_stepsize"),
}
SPARSITY = ("gamma1", "gamma2", "rho", "zero_tol", "density_floor", "gamma2_rounds", "gamma_tiny")
# how a label writes a hyperparameter: the symbol its declaration gives it (Hyperparameter.
# symbol), the first declaration among PERSONALISED's; its name where none gives one
SYMBOLS: dict[str, str] = {}
for _algo in PERSONALISED:
    for _h in ALGORITHMS[_algo].hyperparameters:
        if _h.symbol:
            SYMBOLS.setdefault(_h.name, _h.symbol)


def method_name(algorithm: str) -> str:
    """How the page names an algorithm: a method's declared label (Algorithm.label), any other
    name as it is."""
    return ALGORITHMS[algorithm].label if algorithm in METHODS else algorithm


# ---- the paper's numbers (spec seed-002 §5), % -------------------------------------------
# Tables II-V: per method (PM, GM); sFedHP and pFedMe per lambda, HeurFedAMP per alpha.
TABLES = {
    ("MNIST", 1): ("Table II", {
        FEDAVG: (None, 91.63), HIERFAVG: (None, 93.22), FEDPROX: (None, 93.43),
        PERFEDAVG: (56.5, None), PFEDGP: (98.12, None),
        HEURFEDAMP: {0.1: (97.11, None), 0.5: (98.55, None)},
        PFEDME: {5: (98.8, 88.83), 15: (98.92, 89.34), 20: (98.91, 89.06), 25: (97.6, 80.12),
                   30: (52.07, 10.41)},
        SFEDHP: {5: (98.24, 93.06), 15: (96.55, 91.85), 20: (97.83, 94.93), 25: (96.63, 95.39),
                   30: (96.23, 95.63)},
    }),
    ("MNIST", 2): ("Table III", {
        FEDAVG: (None, 94.31), HIERFAVG: (None, 95.05), FEDPROX: (None, 90.04),
        PERFEDAVG: (78.15, None), PFEDGP: (99.18, None),
        HEURFEDAMP: {0.1: (97.65, None), 0.5: (98.8, None)},
        PFEDME: {5: (99.17, 91.14), 15: (99.38, 91.60), 20: (99.39, 93.04), 25: (98.72, 89.47),
                   30: (52.08, 10.53)},
        SFEDHP: {5: (99.01, 94.69), 15: (98.04, 94.06), 20: (99.08, 97.66), 25: (98.63, 97.87),
                   30: (98.32, 97.94)},
    }),
    ("FMNIST", 1): ("Table IV", {
        FEDAVG: (None, 79.11), HIERFAVG: (None, 83.55), FEDPROX: (None, 78.67),
        PERFEDAVG: (96.95, None), PFEDGP: (98.88, None),
        HEURFEDAMP: {0.1: (95.00, None), 0.5: (98.28, None)},
        PFEDME: {5: (98.84, 79.76), 15: (98.80, 80.22), 20: (98.81, 79.66), 25: (98.90, 80.19),
                   30: (98.94, 80.57)},
        SFEDHP: {5: (98.55, 84.01), 15: (97.61, 82.75), 20: (98.42, 85.64), 25: (95.86, 86.51),
                   30: (91.94, 86.86)},
    }),
    ("FMNIST", 2): ("Table V", {
        FEDAVG: (None, 84.48), HIERFAVG: (None, 85.48), FEDPROX: (None, 84.33),
        PERFEDAVG: (96.47, None), PFEDGP: (99.20, None),
        HEURFEDAMP: {0.1: (97.43, None), 0.5: (98.97, None)},
        PFEDME: {5: (99.12, 82.21), 15: (99.14, 82.18), 20: (99.14, 84.42), 25: (99.17, 85.14),
                   30: (99.16, 84.74)},
        SFEDHP: {5: (98.93, 85.73), 15: (98.5, 83.7), 20: (98.98, 89.29), 25: (96.73, 89.47),
                   30: (93.35, 89.05)},
    }),
}  # fmt: skip
# Table I: GM mean ± std of the rows it took (sFedHP: lambda = 20; pFedMe: its best lambda)
TABLE_I = {
    ("MNIST", 1): {FEDAVG: (91.63, 0.12), HIERFAVG: (93.22, 0.03), FEDPROX: (93.43, 0.15),
                   PFEDME: (89.34, 0.04), SFEDHP: (94.93, 0.03)},
    ("MNIST", 2): {FEDAVG: (94.31, 0.08), HIERFAVG: (95.05, 0.07), FEDPROX: (90.04, 0.08),
                   PFEDME: (93.04, 0.14), SFEDHP: (97.66, 0.06)},
    ("FMNIST", 1): {FEDAVG: (79.11, 0.09), HIERFAVG: (83.55, 0.15), FEDPROX: (78.67, 0.04),
                    PFEDME: (80.57, 0.07), SFEDHP: (85.64, 0.04)},
    ("FMNIST", 2): {FEDAVG: (84.48, 0.06), HIERFAVG: (85.48, 0.08), FEDPROX: (84.33, 0.10),
                    PFEDME: (85.14, 0.11), SFEDHP: (89.29, 0.05)},
}  # fmt: skip
SETTINGS = {(200, 800): 1, (900, 300): 2}  # label_cycle (train, test) per label
PAPER_FEDPROX_MU = 0.001  # the only FedProx row of the tables
LAMBDA_CLAIMS = (
    "sFedHP's GM accuracy rises with λ (Tables II–V, Fig. 4)",
    "sFedHP's PM accuracy falls as λ grows (Tables II–V)",
)
# Fig. 3: "20 % density" (a ratio: within the ratios' factor), "about 80 % fewer bits" (pFedMe's
# bits over sparse sFedHP's ≈ 5), "similar" GM accuracy (the difference within ACCURACY_PP)
SPARSE_DENSITY, SPARSE_RATIO = 0.2, 5.0

# ---- readings: where each client's labels and test rows come from ------------------------


def _partition(config: dict) -> dict:
    part = config.get("partition")
    return part if isinstance(part, dict) else {}


def _label_cycle(config: dict, labels: int, pooled: bool) -> bool:
    part = _partition(config)
    return (
        part.get("kind") == "label_cycle"
        and part.get("labels_per_client") == labels
        and (part.get("test_pool", "split") == "pooled") == pooled  # absent: split
    )


READINGS = (
    Reading(
        "5 labels, test rows from the test file",
        PAPER_TEXT,
        "§4.1's text: each client holds 5 of the 10 labels, its train rows from the train file "
        "and its test rows from the test file.",
        lambda c: _label_cycle(c, 5, pooled=False),
    ),
    Reading(
        "2 labels, pooled (pFedMe's generator)",
        AUTHORS_CODE,
        "pFedMe's public generator, which the paper says it follows: each client holds 2 labels "
        "(not §4.1's 5), and the train and test files are pooled, each client's test rows drawn "
        "from the pool like its train rows; scored against the paper's setting-1 tables unless "
        "its sizes are setting 2's.",
        lambda c: _label_cycle(c, 2, pooled=True),
    ),
    Reading(
        "another partition",
        VARIATION,
        "A partition neither the paper's text nor pFedMe's generator describes (another number "
        "of labels, another source of test rows, or another partitioner).",
        lambda c: True,
    ),
)
TEXT_READING = READINGS[0]


# ---- reading the traces ----------------------------------------------------------------------
# Per run, SQL over the traces returns one row (its best and final accuracies, density, bits);
# per configuration and round, the means the figures draw. No trace row comes back whole.

HP = tuple(HYPERPARAMETER_COLUMNS)
IDENTITY = ("run_id", "dataset", "partition", "model", "algorithm", "seed", "status")
# a run's scores over its trace rows: best over the evaluated rounds, and at its last round
SCORES = {
    "gm_best": "max(100.0::DOUBLE * test_accuracy) FILTER (WHERE NOT isnan(test_accuracy))",
    "pm_best": "max(100.0::DOUBLE * pm_test_accuracy) FILTER (WHERE NOT isnan(pm_test_accuracy))",
    "gm_final": "arg_max_null(100.0::DOUBLE * test_accuracy, round)",
    "pm_final": "arg_max_null(100.0::DOUBLE * pm_test_accuracy, round)",
    "gm_mean": "avg(100.0::DOUBLE * test_accuracy) FILTER (WHERE NOT isnan(test_accuracy))",
    "rounds": "max(round)",
    "density": "arg_max_null(density, round)",
    "bits": "arg_max_null(bits, round)",
}
# what the figures average per round (accuracies in %)
CURVES = {
    "test_accuracy": "100.0::DOUBLE * test_accuracy",
    "pm_test_accuracy": "100.0::DOUBLE * pm_test_accuracy",
    "train_loss": "train_loss",
    "density": "density",
    "pm_density": "pm_density",
    "bits": "bits",
}


def run_scores(source: ReportData | str | Path) -> pd.DataFrame:
    """Each run's scores, read from its trace rows (SQL: no trace row comes back whole).

    Parameters
    ----------
    source
        The results (a ``ReportData``, or a results folder).

    Returns
    -------
    pandas.DataFrame
        One row per run of the family with trace rows (FedAvg's only on data sets with
        personalised runs), by run id: identity, status, data ``source``, ``reading``,
        hyperparameters, ``config`` and ``label``; from its trace the best-over-rounds and final
        GM/PM (%), the mean GM over the evaluated rounds (``gm_mean``, Fig. 2's speed), the last
        round (``rounds``), final density and bits; ``horizon`` (the rounds it was planned for)
        and ``covered`` (the rounds it covers: a diverged run covers its horizon, its result
        being final); ``evidence`` (its data in the settings' terms, settings.data_of) and
        ``net`` (its model, settings.model_of).
    """
    data = as_data(source)
    names = ", ".join(f"'{a}'" for a in (*PERSONALISED, *BASELINES))
    cols = ", ".join(f"r.{sql_ident(c)}" for c in dict.fromkeys([*IDENTITY, *HP]))
    scores = ", ".join(f"{sql} AS {name}" for name, sql in SCORES.items())
    df = data.frame(
        f"SELECT {cols}, r.rounds AS horizon, {', '.join(f's.{n}' for n in SCORES)} FROM runs r "
        f"JOIN (SELECT run_id, {scores} FROM traces WHERE algorithm IN ({names}) "
        "GROUP BY run_id) s ON r.run_id = s.run_id ORDER BY r.run_id"
    )
    personal = set(df.loc[df["algorithm"].isin(PERSONALISED), "dataset"])
    df = df[(df["algorithm"] != FEDAVG) | df["dataset"].isin(personal)].reset_index(drop=True)
    source_of = data.run_frame(["run_id", "source"]).set_index("run_id")["source"]
    df["source"] = source_of.reindex(df["run_id"]).to_numpy()
    configs = data.configs(df["run_id"])
    df["reading"] = [reading_of(READINGS, configs[str(r)]).name for r in df["run_id"]]
    # β from the config: results folders written before the shard stopped renaming a summary's
    # "beta" to "data_beta" hold null in the runs table's hyperparameter column beta
    df["beta"] = [(configs[str(r)].get("params") or {}).get("beta") for r in df["run_id"]]
    df["evidence"] = [data_of(configs[str(r)]) for r in df["run_id"]]
    df["net"] = [model_of(configs[str(r)]) for r in df["run_id"]]
    diverged = df["status"] == "diverged"
    df["covered"] = df["rounds"].where(~diverged, df["horizon"]).fillna(0).astype(int)
    df = _with_configs(df)
    keep = [
        "run_id",
        "dataset",
        "partition",
        "model",
        "source",
        "algorithm",
        "config",
        "label",
        "seed",
        "status",
        "reading",
        *HP,
        *SCORES,
        "horizon",
        "covered",
        "evidence",
        "net",
    ]
    return df[list(dict.fromkeys(keep))]


def round_means(data: ReportData, runs: pd.DataFrame, keys: list[str], columns) -> pd.DataFrame:
    """What a figure draws: per group of runs and round, the mean over their trace rows.

    Parameters
    ----------
    data
        The results the traces are read from.
    runs
        The runs averaged, one row per run (rows of :func:`run_scores`).
    keys
        Columns of ``runs`` that group them (one curve per group).
    columns
        Names of CURVES: the values averaged.

    Returns
    -------
    pandas.DataFrame
        One row per group and round: ``keys``, ``round`` and ``columns``.
    """
    return data.round_means(runs, keys, {c: CURVES[c] for c in columns})


def _fmt_value(v) -> str:
    return f"{v:g}" if isinstance(v, float | int | np.number) else str(v)


def _with_configs(df: pd.DataFrame) -> pd.DataFrame:
    """Add ``config`` (all hyperparameters: runs that differ only in the seed share it) and
    ``label`` (the method and the hyperparameters that tell its configurations apart)."""
    hp = [c for c in HP if c in df.columns]
    df["config"] = ["|".join(map(str, r)) for r in df[[*hp, "algorithm"]].itertuples(index=False)]
    labels = {}
    for (ds, algo), rows in df.groupby(["dataset", "algorithm"]):
        varying = [c for c in hp if rows[c].nunique(dropna=True) > 1]
        for config, r in rows.groupby("config"):
            labels[(ds, config)] = _label(algo, r.iloc[0], varying)
    df["label"] = [labels[k] for k in zip(df["dataset"], df["config"], strict=True)]
    return df


def _label(algo: str, row: pd.Series, varying: list[str]) -> str:
    """The method, its LABEL_PARAMS and the other hyperparameters that vary; for sFedHP the
    sparsity settings only on a sparse run (they do nothing at gamma = 0)."""
    own = LABEL_PARAMS.get(algo, ())
    hidden: tuple[str, ...] = ()
    parts = []
    if algo == SFEDHP:
        hidden = ("lambda1", "lambda2", *SPARSITY)
        if row["lambda1"] == row["lambda2"]:
            parts.append(f"λ={row['lambda1']:g}")
        else:
            parts.append(
                f"{SYMBOLS['lambda1']}={row['lambda1']:g} {SYMBOLS['lambda2']}={row['lambda2']:g}"
            )
        schedule = bool(row["density_floor"] or row["gamma2_rounds"])  # else gamma_tiny unused
        shown_sparse = SPARSITY if schedule else SPARSITY[:-1]
        own = tuple(c for c in shown_sparse if _sparse(row) and row[c])
    shown = [*own, *(c for c in varying if c not in own and c not in hidden)]
    parts += [f"{SYMBOLS.get(c, c)}={_fmt_value(row[c])}" for c in shown if pd.notna(row[c])]
    return " ".join([method_name(algo), *parts])


def _sparse(row) -> bool:
    return (row.get("gamma1") or 0) > 0 or (row.get("gamma2") or 0) > 0


def sparse_mask(frame: pd.DataFrame) -> pd.Series:
    """Rows of sFedHP with a sparsity term (gamma1 or gamma2 > 0): Fig. 3's runs."""
    g1 = frame["gamma1"].fillna(0) if "gamma1" in frame else 0
    g2 = frame["gamma2"].fillna(0) if "gamma2" in frame else 0
    return pd.Series((g1 > 0) | (g2 > 0), index=frame.index, dtype=bool)


# ---- matching to the paper -------------------------------------------------------------------


def paper_table(evidence: dict, net: str):
    """The table of Tables II-V a data set's numbers are shown against.

    A network on MNIST or FMNIST is shown against its data's table of its partition's
    setting; a partition that is no setting of the paper (pFedMe's generator's 2 labels,
    pooled; other sizes) against setting 1's, for reference only: its claims are not at the
    paper's setting, and say which part of the partition is not.

    Parameters
    ----------
    evidence
        The data set's data in the settings' terms (``settings.data_of`` of a run's config).
    net
        Its model (``settings.model_of``).

    Returns
    -------
    tuple
        ``(key, why)``: the table's key ``(data, setting)`` (a key of TABLES), or None where no
        table applies, and why, in words.
    """
    data = evidence.get("data")
    if data not in ("MNIST", "FMNIST"):
        return None, "not MNIST or Fashion-MNIST"
    if net.startswith("MLR") or not re.match(r"^(\d+|d)-\d", net):
        return None, f"{data}, model {net}: the tables are the network's (Fig. 2 is the MLR's)"
    sizes = evidence.get("train/test images per label") or ""
    found = {f"{tr}/{te}": k for (tr, te), k in SETTINGS.items()}.get(sizes)
    if found is not None and evidence.get("labels per client") == 5:
        key = (data, found)
        return key, f"{data} setting {found} ({TABLE_NAMES[key]})"
    key = (data, 1)
    labels, rows = evidence.get("labels per client"), evidence.get("test rows")
    return key, (
        f"{data}, {labels} labels per client, {sizes} images per label, test rows {rows}: no "
        f"setting of the paper, shown against setting 1 ({TABLE_NAMES[key]}) for reference"
    )


def paper_values(key, algo: str, row: pd.Series) -> tuple[float | None, float | None]:
    """The paper's numbers for one configuration: its row of Tables II-V.

    Parameters
    ----------
    key
        The table's key (:func:`paper_table`), or None.
    algo
        The configuration's algorithm.
    row
        The configuration's hyperparameters (``lambda1``, ``lambda2``, ``lambda``, ``mu``,
        ``alpha_self``, ``gamma1``, ``gamma2``, as its algorithm has them).

    Returns
    -------
    tuple
        ``(PM, GM)`` in %, each None where the row has no such number; ``(None, None)`` where the
        table has no row for the configuration (a sparse sFedHP, λ1 ≠ λ2, a λ, μ or α the table
        does not have).
    """
    if key is None or algo not in TABLES[key][1]:
        return None, None
    entry = TABLES[key][1][algo]
    if algo == SFEDHP:
        if row["lambda1"] != row["lambda2"] or _sparse(row):
            return None, None
        entry = entry.get(row["lambda1"], (None, None))
    elif algo == PFEDME:
        entry = entry.get(row["lambda"], (None, None))
    elif algo == HEURFEDAMP:
        entry = entry.get(row["alpha_self"], (None, None))
    elif algo == FEDPROX and row["mu"] != PAPER_FEDPROX_MU:
        return None, None
    return entry


def paper_spread(key, algo: str, gm: float | None) -> float | None:
    """Table I's ± of a GM number, where Table I took that row.

    Parameters
    ----------
    key
        The table's key, ``(data set, case)``.
    algo
        The configuration's algorithm.
    gm
        The GM number of Tables II-V; None: none.

    Returns
    -------
    float or None
        The ± where Table I's mean is ``gm``; None where the paper states none.
    """
    mean_std = TABLE_I.get(key, {}).get(algo) if gm is not None else None
    return mean_std[1] if mean_std is not None and mean_std[0] == gm else None


def _paper_text(key, algo: str, value: float | None, gm: bool) -> str:
    if value is None:
        return ""
    spread = paper_spread(key, algo, value) if gm else None
    return f"{value:.2f}" if spread is None else f"{value:.2f} ± {spread:.2f}"


def accuracy_band(key, algo: str, value: float, gm: bool) -> Band:
    """A table number at its tolerance: the shared ``ACCURACY_PP`` points either way.

    Table I's ± (0.03 to 0.15) is the spread of the paper's own runs, not a tolerance a
    reproduction could be held to, so it is quoted in the paper's number, not used as the band.

    Parameters
    ----------
    key
        The table's key (names the number; not used for the band).
    algo
        The algorithm (names the number; not used for the band).
    value
        The paper's number, in %.
    gm
        Whether it is a GM number (names it; not used for the band).

    Returns
    -------
    Band
    """
    return accuracy(value)


# ---- per run, per configuration ---------------------------------------------------------------

PER_SEED = ("gm_best", "pm_best", "gm_mean", "density", "bits")


def config_summary(scores: pd.DataFrame) -> pd.DataFrame:
    """Each configuration's runs summarised over seeds.

    Parameters
    ----------
    scores
        Rows of :func:`run_scores`.

    Returns
    -------
    pandas.DataFrame
        One row per (data set, configuration): the mean and std over seeds of each score, the
        configuration's runs (``run_ids``), each run's value in seed order (``<column>_seeds``
        for PER_SEED), ``seeds``, ``diverged`` (its diverged runs), the rounds all its runs cover
        (``covered``), its data (``evidence``) and model (``net``).
    """
    keys = ["dataset", "algorithm", "config"]
    g = scores.sort_values(["seed", "run_id"]).groupby(keys, sort=False)
    first = ["label", "partition", "model", "source", "reading", "rounds", "evidence", "net", *HP]
    out = g.first()[first]
    out["seeds"] = g["seed"].nunique()
    out["rounds"] = g["rounds"].max()  # a diverged run stops early
    out["covered"] = g["covered"].min()
    out["diverged"] = g["status"].apply(lambda s: int((s == "diverged").sum()))
    for c in ("gm_best", "gm_final", "pm_best", "pm_final", "density", "bits", "gm_mean"):
        out[c] = g[c].mean()
        out[f"{c}_std"] = g[c].std(ddof=1)
    for c in PER_SEED:
        out[f"{c}_seeds"] = g[c].agg(_values)
    out["run_ids"] = g["run_id"].agg(list)
    return out.reset_index()


def _values(column: pd.Series) -> list[float]:
    """A configuration's per-seed values, NaN (no value) left out."""
    return [float(v) for v in column if pd.notna(v)]


def mean_std(mean, std, n: int) -> str:
    """A mean over seeds as the tables write it.

    Parameters
    ----------
    mean
        The mean; None or NaN: no value.
    std
        The standard deviation over seeds (NaN: none).
    n
        The number of seeds.

    Returns
    -------
    str
        ``"mean ± std"`` (two decimals), the mean alone for fewer than two seeds or no std,
        ``""`` without a mean.
    """
    if mean is None or pd.isna(mean):
        return ""
    return f"{mean:.2f}" if n < 2 or pd.isna(std) else f"{mean:.2f} ± {std:.2f}"


def _ours(row, col: str) -> str:
    text = mean_std(row[col], row[f"{col}_std"], row["seeds"])
    if not text:
        return "no value"
    seeds = f"{row['seeds']} seed" + ("s" if row["seeds"] != 1 else "")
    return f"{text} % ({seeds}, best over {int(row['rounds'])} rounds)"


def _pct(v: float) -> str:
    return f"{v:.2f}"


def row_claims(key, row: pd.Series, where: str = "", anchor: str = "") -> list[Claim]:
    """One configuration against its row of Tables II-V.

    Parameters
    ----------
    key
        The table's key (:func:`paper_table`).
    row
        The configuration, a row of :func:`config_summary`.
    where, anchor
        The data set as the claims name it, and the page's element they link to.

    Returns
    -------
    list of Claim
        A GM and a PM claim where the row has the number, each judged against the row's setting
        (settings.row_setting).
    """
    pm, gm = paper_values(key, row["algorithm"], row)
    setting = row_setting(key, row["algorithm"], row)
    ran = ran_of(pd.DataFrame([row]), setting)
    table = TABLES[key][0]
    name = f"{key[0]} setting {key[1]}"
    at = f" at λ = {row['lambda1']:g}" if row["algorithm"] == SFEDHP else ""
    out = []
    for what, paper, col in (("GM", gm, "gm_best"), ("PM", pm, "pm_best")):
        if paper is None:
            continue
        values = row[f"{col}_seeds"]
        interval = t_interval(values) if values else None
        claim = Claim(
            PAPER,
            f"{method_name(row['algorithm'])}'s {what} accuracy on {name}{at} ({table})",
            f"{what} {_paper_text(key, row['algorithm'], paper, what == 'GM')} %",
            f"{row['label']}: {what} {_ours(row, col)}",  # which configuration, when several
            INCONCLUSIVE if interval is not None else NOT_MEASURED,
            where,
            anchor,
        )
        band = accuracy_band(key, row["algorithm"], paper, what == "GM")
        out.append(judge(claim, setting, ran, band, interval, _pct))
    return out


def results_table(summary: pd.DataFrame, key) -> pd.DataFrame:
    """The page's table of one data set.

    Parameters
    ----------
    summary
        The data set's configurations, rows of :func:`config_summary`.
    key
        The table they are shown against (:func:`paper_table`), or None.

    Returns
    -------
    pandas.DataFrame
        One row per configuration: ours (best and final, mean ± std) next to the paper's row,
        each paper number's verdict (scored only at its setting) and what of the setting is
        unmet.
    """
    rows = []
    for _, r in summary.iterrows():  # a few rows per data set; "lambda" is no identifier
        pm, gm = paper_values(key, r.algorithm, r)
        judged = row_claims(key, r) if key is not None else []
        verdicts = "; ".join(f"{c.claim.split(' ')[1]} {c.verdict}" for c in judged)
        rows.append(
            {
                "method": r.label,
                "seeds": r.seeds,
                "diverged": r.diverged,
                "GM best": mean_std(r.gm_best, r.gm_best_std, r.seeds),
                "GM final": mean_std(r.gm_final, r.gm_final_std, r.seeds),
                "paper GM": _paper_text(key, r.algorithm, gm, True) or "–",
                "PM best": mean_std(r.pm_best, r.pm_best_std, r.seeds),
                "PM final": mean_std(r.pm_final, r.pm_final_std, r.seeds),
                "paper PM": _paper_text(key, r.algorithm, pm, False) or "–",
                "verdict": verdicts or "no paper number",
                "unmet": judged[0].unmet if judged else "",
            }
        )
    return pd.DataFrame(rows)


# ---- claims ----------------------------------------------------------------------------------


def best_configs(summary: pd.DataFrame, col: str, methods) -> pd.DataFrame:
    """Each method's best configuration (the paper tuned each method's hyperparameters).

    Parameters
    ----------
    summary
        Rows of :func:`config_summary`.
    col
        The score ranked by (its mean over seeds; higher is better).
    methods
        The algorithms compared.

    Returns
    -------
    pandas.DataFrame
        The best row of each method that has one, indexed by algorithm; sparse sFedHP is Fig. 3's
        run, not the tables', and never taken.
    """
    s = summary[summary["algorithm"].isin(methods) & ~sparse_mask(summary)].dropna(subset=[col])
    best = best_per_group(s, ["algorithm"], col, "higher")
    return best.sort_values(col, kind="stable").set_index("algorithm")


def _mean(x) -> float:
    return float(np.mean(x)) if len(x) else float("nan")


def _label_of(row) -> str:
    """A configuration's method as the settings name it: sparse sFedHP is Fig. 3's."""
    if row["algorithm"] == SFEDHP and _sparse(row):
        return SPARSE_LABEL
    return method_name(row["algorithm"])


def _scored(
    claim: Claim,
    setting: Setting,
    rows: pd.DataFrame,
    groups: list,
    statistic,
    band: Band,
    extra: dict | None = None,
    fmt=_pct,
) -> Claim:
    """``claim`` (its verdict a placeholder) judged against ``setting``: the compared
    configurations ``rows`` give the Ran; ``statistic`` of the per-seed ``groups`` (one per
    configuration, resampled on its own) gives the bootstrap interval. Not measured when a
    group has no value."""
    ran = ran_of(rows, setting, _label_of, extra)
    if not len(rows) or not groups or any(len(g) == 0 for g in groups):
        return judge(replace(claim, verdict=NOT_MEASURED), setting, ran)
    interval = bootstrap_interval(groups, statistic)
    return judge(replace(claim, verdict=INCONCLUSIVE), setting, ran, band, interval, fmt)


def _wanted(claim: Claim, setting: Setting) -> Claim:
    """A claim with no run to measure it: not measured, its row saying what the setting needs
    (an unmet list of everything would say nothing more)."""
    return replace(judge(claim, setting, Ran()), unmet="")


def _derived(claim: Claim, groups: list, statistic, band: Band) -> Claim:
    """An expectation of ours (claim_kind derived, never gated): scored on whatever runs there
    are, with its interval and seeds."""
    if not groups or any(len(g) == 0 for g in groups):
        return replace(claim, verdict=NOT_MEASURED, claim_kind=DERIVED)
    interval = bootstrap_interval(groups, statistic)
    return replace(
        claim,
        verdict=score(band, interval),
        claim_kind=DERIVED,
        seeds=interval.n,
        interval=interval.text(_pct),
        tolerance=band.text,
    )


def table_claims(summary: pd.DataFrame, key, where: str, anchor: str) -> list[Claim]:
    """The claims of Tables I-V on one network data set.

    Parameters
    ----------
    summary
        The data set's configurations, rows of :func:`config_summary`.
    key
        The table they are shown against (:func:`paper_table`).
    where, anchor
        The data set as the claims name it, and the page's element they link to.

    Returns
    -------
    list of Claim
        sFedHP's GM and PM per λ row (:func:`row_claims`), Table I's two orderings (sFedHP's
        GM the best; HierFAVG's above FedAvg's) and, derived, sFedHP's PM gap to the best other
        method.
    """
    dense = summary[(summary["algorithm"] == SFEDHP) & ~sparse_mask(summary)]
    claims = [c for _, r in dense.iterrows() for c in row_claims(key, r, where, anchor)]
    claims.append(_best_gm_claim(summary, key, where, anchor))
    claims.append(_hierarchy_claim(summary, key, where, anchor))
    claims.append(_pm_gap_claim(summary, key, f"{key[0]} setting {key[1]}", where, anchor))
    return claims


def _table_i_sfedhp(summary: pd.DataFrame) -> pd.DataFrame:
    """sFedHP's configuration of Table I: dense, λ1 = λ2 = 20 (the best such), else the best
    dense one (its λ is then unmet)."""
    dense = summary[(summary["algorithm"] == SFEDHP) & ~sparse_mask(summary)]
    dense = dense.dropna(subset=["gm_best"])
    at = dense[(dense["lambda1"] == TABLE_I_LAMBDA) & (dense["lambda2"] == TABLE_I_LAMBDA)]
    pick = at if len(at) else dense
    return pick.sort_values("gm_best").tail(1)


def _best_gm_claim(summary: pd.DataFrame, key, where: str, anchor: str) -> Claim:
    """Table I: sFedHP's GM above every other method's (each at its best configuration)."""
    name = f"{key[0]} setting {key[1]}"
    paper_gm = {a: v[0] for a, v in TABLE_I[key].items()}
    others = {a: v for a, v in paper_gm.items() if a != SFEDHP}
    rival = max(others, key=others.get)
    paper = (
        f"sFedHP {paper_gm[SFEDHP]:.2f} %, next {method_name(rival)} {others[rival]:.2f} % "
        f"(+{paper_gm[SFEDHP] - others[rival]:.2f} pp)"
    )
    sf = _table_i_sfedhp(summary)
    rivals = best_configs(summary, "gm_best", [a for a in GM_METHODS if a != SFEDHP])
    rows = pd.concat([sf, rivals.reset_index()], ignore_index=True)
    ours = ", ".join(f"{r.label} {r.gm_best:.2f} %" for r in rows.itertuples())
    claim = Claim(
        PAPER,
        f"sFedHP has the best GM accuracy of all methods on {name} (Table I)",
        paper,
        (
            f"{ours} (best over rounds, mean over seeds; the rivals at their best configuration)"
            if len(rows)
            else "no runs"
        ),
        INCONCLUSIVE,
        where,
        anchor,
    )
    groups = [list(r) for r in rows["gm_best_seeds"]] if len(sf) and len(rivals) else []
    band = ordering("sFedHP's GM minus the best other method's GM (pp)")
    return _scored(
        claim,
        best_gm_setting(key),
        rows,
        groups,
        lambda s, *rs: _mean(s) - max(_mean(r) for r in rs),
        band,
    )


def _hierarchy_claim(summary: pd.DataFrame, key, where: str, anchor: str) -> Claim:
    """Table I: HierFAVG's GM above FedAvg's (each at its best configuration)."""
    name = f"{key[0]} setting {key[1]}"
    paper_gm = {a: v[0] for a, v in TABLE_I[key].items()}
    best = best_configs(summary, "gm_best", (HIERFAVG, FEDAVG))
    rows = best.reindex([a for a in (HIERFAVG, FEDAVG) if a in best.index]).reset_index()
    ours = ", ".join(f"{r.label} {r.gm_best:.2f} %" for r in rows.itertuples())
    claim = Claim(
        PAPER,
        f"Hierarchical FedAvg beats flat FedAvg in GM accuracy on {name} (Table I)",
        f"HierFAVG {paper_gm[HIERFAVG]:.2f} %, FedAvg {paper_gm[FEDAVG]:.2f} %",
        f"{ours} (best over rounds, mean over seeds)" if len(rows) else "no runs",
        INCONCLUSIVE,
        where,
        anchor,
    )
    groups = [list(r) for r in rows["gm_best_seeds"]] if len(rows) == 2 else []
    band = ordering("HierFAVG's GM minus FedAvg's (pp)")
    return _scored(
        claim, hierarchy_setting(key), rows, groups, lambda h, f: _mean(h) - _mean(f), band
    )


def _pm_gap_claim(summary, key, name, where, anchor) -> Claim:
    """Derived: the best PM of the other methods minus sFedHP's (λ = 20, Table I's, or else
    the λ we ran that the table has), in pp, against the tables' gap at ACCURACY_PP."""
    rows = TABLES[key][1]
    paper_best = max(
        (v[0], a)
        for a, e in rows.items()
        if a != SFEDHP
        for v in (e.values() if isinstance(e, dict) else [e])
        if v[0] is not None
    )
    dense = summary[(summary["algorithm"] == SFEDHP) & ~sparse_mask(summary)]
    dense = dense[(dense["lambda1"] == dense["lambda2"]) & dense["lambda1"].isin(rows[SFEDHP])]
    dense = dense.dropna(subset=["pm_best"])
    lam = 20.0 if (dense["lambda1"] == 20).any() or not len(dense) else dense["lambda1"].min()
    paper_sf = rows[SFEDHP][lam][0]
    paper_gap = paper_best[0] - paper_sf
    text = (
        f"sFedHP's PM accuracy (λ = {lam:g}) is close to the best PM of the other methods on "
        f"{name} (Tables II–V; our gap against theirs)"
    )
    best_name = method_name(paper_best[1]) if paper_best[1] in METHODS else "pFedGP"
    paper = (
        f"gap {paper_gap:.2f} pp (sFedHP {paper_sf:.2f} %, best {best_name} {paper_best[0]:.2f} %)"
    )
    pm = best_configs(summary, "pm_best", [a for a in PERSONALISED if a != SFEDHP])
    if not len(dense) or not len(pm):
        why = "needs dense sFedHP and another personalised method with PM values"
        return Claim(PAPER, text, paper, why, NOT_MEASURED, where, anchor, DERIVED)
    sf = dense[dense["lambda1"] == lam].sort_values("pm_best").iloc[-1]
    gap, best = float(pm["pm_best"].max()) - float(sf["pm_best"]), pm["pm_best"].idxmax()
    ours = (
        f"gap {gap:.2f} pp (sFedHP {sf['pm_best']:.2f} %, best {method_name(best)} "
        f"{pm['pm_best'].max():.2f} %; best over rounds, mean over seeds)"
    )
    claim = Claim(PAPER, text, paper, ours, NOT_MEASURED, where, anchor)
    groups = [sf["pm_best_seeds"], *pm["pm_best_seeds"]]
    return _derived(
        claim,
        groups,
        lambda s, *rs: max(_mean(r) for r in rs) - _mean(s),
        accuracy(paper_gap),
    )


def convex_claims(summary: pd.DataFrame, readings: dict | None = None) -> list[Claim]:
    """Fig. 2's claims on each linear-model (MLR) data set: GM(sFedHP) ≥ GM(pFedMe) ≥
    GM(HierFAVG), and sFedHP converges faster than pFedMe.

    Parameters
    ----------
    summary
        Rows of :func:`config_summary` (every data set's).
    readings
        Data set -> its Reading; a data set not in it is in the paper's text's.

    Returns
    -------
    list of Claim
        Two per data set with sFedHP, pFedMe and HierFAVG runs, each in its data set's reading;
        without any, the two claims not measured, saying what would make the runs.
    """
    readings = readings or {}
    claim = "Convex (MLR) comparison: GM test accuracy orders sFedHP ≥ pFedMe ≥ HierFAVG (Fig. 2)"
    speed = (
        "Convex (MLR) comparison: sFedHP converges faster than pFedMe (Fig. 2; ours: the "
        "mean GM accuracy over the evaluated rounds, the area under the curve)"
    )
    paper = "ordering shown, no numbers (λ = 25, R = 20, K = 5, |D| = 20, η = 0.05)"
    linear = summary[~summary["model"].astype(str).str.startswith("mlp")]
    found = []
    for ds, rows in linear.groupby("dataset", sort=True):
        top = best_configs(rows, "gm_best", (SFEDHP, PFEDME, HIERFAVG, FEDAVG))
        if not {SFEDHP, PFEDME, HIERFAVG} <= set(top.index):
            continue
        three = top.reindex([SFEDHP, PFEDME, HIERFAVG]).reset_index()
        anchor = f"sfedhp-{slugify(ds)}-accuracy"
        ours = ", ".join(f"{r.label} {r.gm_best:.2f} %" for r in three.itertuples())
        order = Claim(
            PAPER,
            claim,
            paper,
            f"{ours} (best over rounds; mean over {int(three['seeds'].min())} seed(s))",
            INCONCLUSIVE,
            ds,
            anchor,
        )
        two = three.iloc[:2]
        fast = Claim(
            PAPER,
            speed,
            "",
            ", ".join(f"{r.label} {r.gm_mean:.2f} %" for r in two.itertuples()),
            INCONCLUSIVE,
            ds,
            anchor,
        )
        found += in_reading(
            [
                _scored(
                    order,
                    convex_setting(),
                    three,
                    list(three["gm_best_seeds"]),
                    lambda s, p, h: min(_mean(s) - _mean(p), _mean(p) - _mean(h)),
                    ordering("the smaller of sFedHP − pFedMe and pFedMe − HierFAVG (pp)"),
                ),
                _scored(
                    fast,
                    convex_setting((SFEDHP, PFEDME)),
                    two,
                    list(two["gm_mean_seeds"]),
                    lambda s, p: _mean(s) - _mean(p),
                    ordering("sFedHP's mean GM over the rounds minus pFedMe's (pp)"),
                ),
            ],
            readings.get(ds, TEXT_READING),
        )
    if found:
        return found
    why = (
        "no linear-model (MLR) data set with sFedHP, pFedMe and HierFAVG runs here; "
        "config/sfedhp-convex.yaml makes them"
    )
    both = convex_setting((SFEDHP, PFEDME))
    missing = [
        _wanted(Claim(PAPER, claim, paper, why, NOT_MEASURED), convex_setting()),
        _wanted(Claim(PAPER, speed, "", why, NOT_MEASURED), both),
    ]
    return in_reading(missing, TEXT_READING)


def sparse_claims(summary: pd.DataFrame, readings: dict | None = None) -> list[Claim]:
    """Fig. 3's claims on each sparse sFedHP configuration: a density of about 20 %, about 80 %
    fewer bits than pFedMe, and a GM accuracy close to pFedMe's.

    Parameters
    ----------
    summary
        Rows of :func:`config_summary` (every data set's).
    readings
        Data set -> its Reading; a data set not in it is in the paper's text's.

    Returns
    -------
    list of Claim
        Three per sparse configuration, each in its data set's reading; without one, the three
        not measured, saying what would make the run.
    """
    found = _sparse_claims(summary)
    readings = readings or {}
    return [c for ds, mine in found for c in in_reading(mine, readings.get(ds, TEXT_READING))]


SPARSE_TEXTS = (
    (
        "Sparse sFedHP's model density falls to about 20 % (Fig. 3b; the final density of w)",
        "about 20 % (the paper's floor)",
    ),
    (
        "Sparse sFedHP needs about 80 % fewer cloud-link bits than pFedMe (Fig. 3c; ours: pFedMe's "
        "bits over sparse sFedHP's after the same rounds, ≈5 for 80 % fewer)",
        "about 80 % fewer",
    ),
    (
        "Sparse sFedHP's GM accuracy is similar to pFedMe's (Fig. 3a; ours: sFedHP's best GM "
        "minus pFedMe's)",
        "similar",
    ),
)


def _sparse_claims(summary: pd.DataFrame) -> list[tuple[str, list[Claim]]]:
    """(data set, its claims) per sparse run; ("", not measured) when there is none."""
    sparse = summary[(summary["algorithm"] == SFEDHP) & sparse_mask(summary)]
    out = []
    for _, r in sparse.iterrows():
        anchor, where = f"sfedhp-{slugify(r.dataset)}-sparse", f"{r.dataset}: {r.label}"
        seeds = f"{r.seeds} seed(s)"
        density = Claim(
            PAPER,
            *SPARSE_TEXTS[0],
            f"final density {r.density:.3f} ({seeds})",
            INCONCLUSIVE,
            where,
            anchor,
        )
        values = r["density_seeds"]
        one = pd.DataFrame([r])
        ran = ran_of(one, sparse_setting(False), _label_of)
        interval = t_interval(values) if values else None
        claims = [judge(density, sparse_setting(False), ran, about(SPARSE_DENSITY), interval)]
        out.append((r.dataset, claims))
        pf = summary[(summary["dataset"] == r.dataset) & (summary["algorithm"] == PFEDME)]
        if not len(pf):
            why = "no pFedMe run on this data set"
            claims += [
                judge(Claim(PAPER, *t, why, NOT_MEASURED, where, anchor), sparse_setting(), ran)
                for t in SPARSE_TEXTS[1:]
            ]
            continue
        at = pf[pf["lambda"] == sparse_setting().hyper["pFedMe λ"]]
        p = (at if len(at) else pf).sort_values("gm_best").iloc[-1]
        pair = pd.DataFrame([r, p])
        ratio = p["bits"] / r.bits
        claims.append(
            _scored(
                Claim(
                    PAPER,
                    *SPARSE_TEXTS[1],
                    f"{ratio:.3g}x, {1 - 1 / ratio:.1%} fewer "
                    f"({r.bits:.3g} vs {p['label']}'s {p['bits']:.3g} bits after "
                    f"{int(r.rounds)} rounds)",
                    INCONCLUSIVE,
                    where,
                    anchor,
                ),
                sparse_setting(),
                pair,
                [r["bits_seeds"], p["bits_seeds"]],
                lambda s, q: _mean(q) / _mean(s),
                about(SPARSE_RATIO),
                fmt=lambda v: f"{v:.3g}",
            )
        )
        diff = r.gm_best - p["gm_best"]
        similar = accuracy(0.0)
        claims.append(
            _scored(
                Claim(
                    PAPER,
                    *SPARSE_TEXTS[2],
                    f"sFedHP {r.gm_best:.2f} %, {p['label']} {p['gm_best']:.2f} % ({diff:+.2f} pp)",
                    INCONCLUSIVE,
                    where,
                    anchor,
                ),
                sparse_setting(),
                pair,
                [r["gm_best_seeds"], p["gm_best_seeds"]],
                lambda s, q: _mean(s) - _mean(q),
                Band(similar.lo, similar.hi, f"the difference {similar.text}"),
            )
        )
    if out:
        return out
    why = "no sFedHP run with γ1 or γ2 > 0 here; config/sfedhp-sparse.yaml makes one"
    settings = (sparse_setting(False), sparse_setting(), sparse_setting())
    missing = [
        _wanted(Claim(PAPER, *t, why, NOT_MEASURED), s)
        for t, s in zip(SPARSE_TEXTS, settings, strict=True)
    ]
    return [("", missing)]


def lambda_slice(summary: pd.DataFrame) -> pd.DataFrame:
    """The configurations Fig. 4 and the λ claims compare: dense sFedHP with λ1 = λ2, the other
    hyperparameters at their most common setting, sorted by λ (``summary``: rows of
    :func:`config_summary`)."""
    s = summary[(summary["algorithm"] == SFEDHP) & (summary["lambda1"] == summary["lambda2"])]
    s = s[~sparse_mask(s)]
    rest = [c for c in HP if c not in ("lambda1", "lambda2") and s[c].nunique() > 1]
    if rest:  # one slice: the most frequent values of the other hyperparameters
        top = pd.Series(["|".join(map(str, r)) for r in s[rest].itertuples(index=False)], s.index)
        s = s[top == top.value_counts().index[0]]
    return s.sort_values("lambda1")


def lambda_table(summary: pd.DataFrame, key) -> pd.DataFrame:
    """Dense sFedHP per λ next to the paper's numbers.

    Parameters
    ----------
    summary
        The data set's configurations, rows of :func:`config_summary`.
    key
        The table they are shown against (:func:`paper_table`), or None.

    Returns
    -------
    pandas.DataFrame
        One row per λ of :func:`lambda_slice` (best GM and PM, mean and std, seeds, the
        ``config``, ``paper GM`` and ``paper PM``); empty when sFedHP ran with one λ only.
    """
    s = lambda_slice(summary)
    if s["lambda1"].nunique() < 2:
        return pd.DataFrame()
    cols = ["lambda1", "seeds", "gm_best", "gm_best_std", "pm_best", "pm_best_std", "config"]
    out = s[cols].rename(columns={"lambda1": "lambda"})
    paper = [paper_values(key, SFEDHP, r) for _, r in s.iterrows()]
    out["paper GM"] = [gm for _, gm in paper]
    out["paper PM"] = [pm for pm, _ in paper]
    return out.sort_values("lambda").reset_index(drop=True)


def lambda_claims(summary: pd.DataFrame, key, where: str, anchor: str) -> list[Claim]:
    """The λ claims of Tables II-V and Fig. 4 on one network data set.

    Parameters
    ----------
    summary
        The data set's configurations, rows of :func:`config_summary`.
    key
        The table they are shown against (:func:`paper_table`).
    where, anchor
        The data set as the claims name it, and the page's element they link to.

    Returns
    -------
    list of Claim
        The paper's: sFedHP's GM rises from the smallest λ to the largest (at λ = 5 → 30);
        derived: its PM falls (no row of its own when sFedHP ran with one λ only).
    """
    s = lambda_slice(summary)
    setting = lambda_setting(key)
    lo_need, hi_need = setting.hyper["λ from"], setting.hyper["λ to"]
    table = TABLES[key][1][SFEDHP] if key is not None else {}
    out = []
    for col, text, up in (("gm", LAMBDA_CLAIMS[0], True), ("pm", LAMBDA_CLAIMS[1], False)):
        k = 1 if col == "gm" else 0
        paper = (
            f"{table[lo_need][k]:.2f} → {table[hi_need][k]:.2f} % (λ = {lo_need:g} → {hi_need:g})"
            if table
            else "the tables' trend over λ ∈ {5, ..., 30}"
        )
        if s["lambda1"].nunique() < 2:
            ran = ran_of(s, setting, None, _lambda_span(s))
            claim = Claim(
                PAPER, text, paper, "sFedHP ran with one λ only", NOT_MEASURED, where, anchor
            )
            if up:  # the derived PM trend needs two λ as much: no row of its own
                out.append(judge(claim, setting, ran))
            continue
        lo = s[s["lambda1"] == s["lambda1"].min()].sort_values(f"{col}_best").iloc[-1]
        hi = s[s["lambda1"] == s["lambda1"].max()].sort_values(f"{col}_best").iloc[-1]
        span = f"λ = {lo['lambda1']:g} → {hi['lambda1']:g}"
        a, b = lo[f"{col}_best"], hi[f"{col}_best"]
        ours = f"{a:.2f} → {b:.2f} % ({span}, best over rounds, {int(lo['seeds'])} seed(s))"
        claim = Claim(PAPER, text, paper, ours, INCONCLUSIVE, where, anchor)
        groups = [lo[f"{col}_best_seeds"], hi[f"{col}_best_seeds"]]
        if up:  # §V-B: "properly increasing λ" helps
            pair = pd.DataFrame([lo, hi])
            band = ordering("GM at the largest λ minus at the smallest (pp)")
            out.append(
                _scored(
                    claim,
                    setting,
                    pair,
                    groups,
                    lambda x, y: _mean(y) - _mean(x),
                    band,
                    extra=_lambda_span(pair),
                )
            )
        else:  # our reading of the tables' numbers
            band = ordering("PM at the smallest λ minus at the largest (pp)")
            out.append(_derived(claim, groups, lambda x, y: _mean(x) - _mean(y), band))
    return out


def _lambda_span(rows: pd.DataFrame) -> dict:
    if not len(rows):
        return {"λ from": None, "λ to": None}
    return {"λ from": float(rows["lambda1"].min()), "λ to": float(rows["lambda1"].max())}
