"""What each of the sFedHP paper's claims needs: its ``Setting`` (report.evidence), and the
``Ran`` of the runs a claim is measured on, in the same terms.

The paper (spec seed-002 §2.6, §4, §5) states every table and figure at one protocol: 20
clients under E = 4 edges, all of them every round, η1 = η2 = 0.05, |D| = 20, K = 5 (Table I's
caption), R = 20 and β = 1 (Figs. 2-5's captions; the spec reads them for the tables too),
T = 800 rounds (Table I; the figures' T is not stated, the spec's reading is 800), and "each
experiment is run at least 3 times" (so 3 seeds). Tables II-V are MNIST and Fashion-MNIST
(FMNIST) with 5 labels per client at setting 1 (200 train / 800 test images per label) or
setting 2 (900 / 300), test images from the test file, and §V-A's network 784-500-200-10;
γ1 = γ2 = 0 (non-sparse) throughout. Fig. 2 is multinomial logistic regression (MLR) on MNIST
and Fig. 3 the sparse run on MNIST, both on §V-B's 75/25 split, at λ = 25.

Stand-ins the project declares: the 784-100-10 network (Remark 1's 79,510 parameters) for the
text's 784-500-200-10, and, for the claims the paper makes on MNIST alone (Figs. 2 and 3),
Fashion-MNIST for MNIST. Tables II-III (MNIST) and IV-V (FMNIST) are each their own data set's:
an FMNIST run is never scored against an MNIST table. "Per class" may be read per client or in
total (spec ambiguity D1); either reading meets a setting's sizes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping

import pandas as pd

from ...algorithms import ALGORITHMS
from ...report.evidence import Ran, Setting

__all__ = [
    "MLR_MODEL",
    "MNIST_STAND_IN",
    "MODEL_STAND_IN",
    "PAPER_MODEL",
    "PROTOCOL",
    "ROUNDS",
    "SEEDS",
    "TABLE_NAMES",
    "best_gm_setting",
    "claim_settings",
    "convex_setting",
    "data_name",
    "data_of",
    "hierarchy_setting",
    "lambda_setting",
    "model_of",
    "ran_of",
    "row_setting",
    "sparse_setting",
]

PAPER_MODEL = "784-500-200-10"  # §V-A: "DNN with two hidden layers of size [500, 200]"
MLR_MODEL = "MLR 784-10"  # Fig. 2: l2-regularised multinomial logistic regression
MODEL_STAND_IN = (
    "784-100-10",
    "Remark 1's 79,510 parameters; about 6x cheaper than the text's 784-500-200-10",
)
MNIST_STAND_IN = ("FMNIST", "MNIST is not on this machine")
ROUNDS = 800  # Table I's T; the figures' T is not stated (spec §4.3 [A]: 800)
SEEDS = 3  # §V-A: "each experiment is run at least 3 times"
CLIENTS = 20
TEST_FILE = "from the test file"
# every table's and figure's protocol, by the names the claims table shows
PROTOCOL = {"η1": 0.05, "η2": 0.05, "|D|": 20, "K": 5, "R": 20, "β": 1.0, "E": 4}
TABLE_NAMES = {
    ("MNIST", 1): "Table II",
    ("MNIST", 2): "Table III",
    ("FMNIST", 1): "Table IV",
    ("FMNIST", 2): "Table V",
}
TABLE_SIZES = {1: "200/800", 2: "900/300"}  # train / test images per label
TABLE_I_LAMBDA = 20.0  # Table I's sFedHP rows are the λ = 20 rows of Tables II-V
LAMBDA_SPAN = (5.0, 30.0)  # Tables II-V's λ grid {5, 15, 20, 25, 30}, its ends
FIGURE_LAMBDA = 25.0  # Figs. 2, 3, 5: λ1 = λ2 = λ = 25 for sFedHP and pFedMe
SPARSE_HYPER = {  # Fig. 3's γ schedule (§V-C, read literally: spec §2.5 [A])
    "γ1 = γ2": 0.001,
    "density floor": 0.2,
    "γ2 off after round": 100,
    "ρ": 6e-5,  # Figs. 4-5's; Fig. 3's is not stated
}


def _col(name: str) -> Callable[[Mapping], object]:
    return lambda row: row.get(name)


def _pair(a: str, b: str) -> Callable[[Mapping], object]:
    """A pair of hyperparameters the claim states equal: their value, or "a/b" when not."""

    def value(row: Mapping):
        x, y = _py(row.get(a)), _py(row.get(b))
        return x if x == y else f"{x}/{y}"

    return value


_STEP = ("sfedhp", "pfedme", "fedavg", "hierfavg", "fedprox", "heurfedamp")
_LOCAL = ("pfedme", "fedavg", "fedprox", "perfedavg", "heurfedamp")
# how each name of a setting's hyperparameters reads off a configuration, per algorithm
# (an algorithm a name does not apply to has no entry: HierFAVG has no K)
HYPER_OF: dict[str, dict[str, Callable[[Mapping], object]]] = {
    "η1": {**{a: _col("stepsize") for a in _STEP}, "perfedavg": _col("inner_stepsize")},
    "η2": {a: _col("inner_stepsize") for a in ("sfedhp", "pfedme")},
    "|D|": {a: _col("batch_size") for a in (*_STEP, "perfedavg")},
    "K": {a: _col("inner_steps") for a in ("sfedhp", "pfedme")},
    "R": {
        **{a: _col("local_steps") for a in _LOCAL},
        **{a: _col("edge_rounds") for a in ("sfedhp", "hierfavg")},
    },
    "β": {a: _col("beta") for a in ("sfedhp", "pfedme")},
    "E": {a: _col("edges") for a in ("sfedhp", "hierfavg")},
    "λ1 = λ2": {"sfedhp": _pair("lambda1", "lambda2")},
    "γ1 = γ2": {"sfedhp": _pair("gamma1", "gamma2")},
    "pFedMe λ": {"pfedme": _col("lambda")},
    "FedProx μ": {"fedprox": _col("mu")},
    "HeurFedAMP α": {"heurfedamp": _col("alpha_self")},
    "ρ": {"sfedhp": _col("rho")},
    "density floor": {"sfedhp": _col("density_floor")},
    "γ2 off after round": {"sfedhp": _col("gamma2_rounds")},
}


def _py(v):
    """A plain Python value (numpy scalars compare as numbers; NA and NaN are None)."""
    if v is None or v is pd.NA:
        return None
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _label(algo: str) -> str:
    return ALGORITHMS[algo].label if algo in ALGORITHMS else algo


# ---- what a run was, in the settings' terms ------------------------------------------------


def data_name(source, name="") -> str:
    """The paper's name of a run's data: FMNIST (fashion-mnist, fmnist), MNIST, else the
    source (or the data set's name when it has no source). The source decides."""
    text = str(source or name or "").lower()
    if re.search("fmnist|fashion", text):
        return "FMNIST"
    if "mnist" in text:
        return "MNIST"
    return str(source or name or "")


def data_of(config: Mapping) -> dict:
    """A run's data in the settings' terms, from its normalised config: ``data``, ``clients``,
    ``labels per client``, ``train/test images per label``, ``train/test split`` (%) and
    ``test rows`` (from the test file, or pooled with the train rows)."""
    ds, part = config.get("dataset") or {}, config.get("partition") or {}
    tr, te = part.get("train_per_label"), part.get("test_per_label")
    sizes = f"{tr}/{te}" if tr and te else None
    split = f"{round(100 * tr / (tr + te))}/{round(100 * te / (tr + te))}" if sizes else None
    pooled = part.get("test_pool") == "pooled"
    return {
        "data": data_name(ds.get("source"), ds.get("name")),
        "clients": part.get("clients"),
        "labels per client": part.get("labels_per_client"),
        "train/test images per label": sizes,
        "train/test split": split,
        "test rows": "pooled with the train rows" if pooled else TEST_FILE,
    }


def model_of(config: Mapping) -> str:
    """A run's model as the settings name it: a network as its layer sizes (784-100-10 on the
    image files; d and k where the input and classes are not those), a linear softmax model
    as MLR."""
    ds, model = config.get("dataset") or {}, config.get("model") or {}
    images = ds.get("kind") == "idx"
    d, k = ("784", "10") if images else ("d", "k")
    if model.get("kind") == "mlp":
        return "-".join([d, *(str(h) for h in model.get("hidden") or []), k])
    if model.get("kind") in (None, "linear") and model.get("loss") == "softmax":
        return f"MLR {d}-{k}"
    return str(model.get("kind") or model.get("loss") or "")


def ran_of(
    rows: pd.DataFrame,
    setting: Setting,
    label: Callable[[Mapping], str] | None = None,
    extra: Mapping[str, object] | None = None,
) -> Ran:
    """What the compared configurations ``rows`` (the page's configuration summary: one data
    set's rows, each with ``evidence`` (its ``data_of``), ``net`` (its ``model_of``),
    ``covered`` (the rounds each of its runs covers, at least) and ``seeds``) were, in
    ``setting``'s terms: a hyperparameter read off every row it applies to (a tuple when they
    differ, None when none), ``extra`` the values of the comparison's own (λ from, λ to),
    methods by ``label`` (default the algorithm's label)."""
    if not len(rows):
        return Ran()
    label = label or (lambda r: _label(r["algorithm"]))
    first = rows.iloc[0]
    hyper = {k: _hyper(rows, k) for k in setting.hyper}
    hyper.update(extra or {})
    return Ran(
        data={k: first["evidence"].get(k) for k in setting.data},
        model=str(first["net"]),
        rounds=int(rows["covered"].min()),
        hyper=hyper,
        methods=tuple(dict.fromkeys(label(r) for _, r in rows.iterrows())),
        seeds=int(rows["seeds"].min()),
    )


def _hyper(rows: pd.DataFrame, name: str):
    read = HYPER_OF.get(name, {})
    values = [_py(read[r["algorithm"]](r)) for _, r in rows.iterrows() if r["algorithm"] in read]
    unique = list(dict.fromkeys(values))
    if not unique:
        return None
    return unique[0] if len(unique) == 1 else tuple(unique)


# ---- the settings ------------------------------------------------------------------------------


def _protocol(algos) -> dict:
    """The protocol's hyperparameters that apply to any of ``algos``."""
    return {k: v for k, v in PROTOCOL.items() if any(a in HYPER_OF[k] for a in algos)}


def table_data(key) -> dict:
    """Tables II-V's data: ``key`` = (MNIST or FMNIST, setting 1 or 2)."""
    data, setting = key
    return {
        "data": data,
        "clients": CLIENTS,
        "labels per client": 5,
        "train/test images per label": TABLE_SIZES[setting],
        "test rows": TEST_FILE,
    }


def _table(key, methods, hyper: Mapping) -> Setting:
    algos = [a for a in ALGORITHMS if _label(a) in methods] or ["sfedhp"]
    return Setting(
        data=table_data(key),
        model=PAPER_MODEL,
        rounds=ROUNDS,
        hyper={**_protocol(algos), **hyper},
        methods=tuple(methods),
        seeds=SEEDS,
        stand_ins={"model": MODEL_STAND_IN},
    )


def row_setting(key, algo: str, row: Mapping | None = None) -> Setting:
    """One row of Tables II-V: ``algo`` at its row's hyperparameters (sFedHP's λ1 = λ2 and
    γ = 0, pFedMe's λ, FedProx's μ = 0.001, HeurFedAMP's α; read off ``row``)."""
    row = {} if row is None else row
    own = {
        "sfedhp": {"λ1 = λ2": _py(row.get("lambda1")), "γ1 = γ2": 0},
        "pfedme": {"pFedMe λ": _py(row.get("lambda"))},
        "fedprox": {"FedProx μ": 0.001},
        "heurfedamp": {"HeurFedAMP α": _py(row.get("alpha_self"))},
    }.get(algo, {})
    return _table(key, [_label(algo)], {k: v for k, v in own.items() if v is not None})


def best_gm_setting(key) -> Setting:
    """Table I: sFedHP (its λ = 20 rows) against FedAvg, HierFAVG, FedProx and pFedMe, each at
    its best hyperparameters (the paper "fine-tune[d]" them)."""
    methods = [_label(a) for a in ("sfedhp", "pfedme", "fedavg", "hierfavg", "fedprox")]
    return _table(key, methods, {"λ1 = λ2": TABLE_I_LAMBDA, "γ1 = γ2": 0})


def hierarchy_setting(key) -> Setting:
    """Table I: HierFAVG against FedAvg."""
    return _table(key, [_label("hierfavg"), _label("fedavg")], {})


def lambda_setting(key) -> Setting:
    """Tables II-V's λ grid: sFedHP's GM at λ = 30 against λ = 5 (non-sparse)."""
    lo, hi = LAMBDA_SPAN
    return _table(key, [_label("sfedhp")], {"λ from": lo, "λ to": hi, "γ1 = γ2": 0})


def _figure_data() -> dict:
    return {
        "data": "MNIST",
        "clients": CLIENTS,
        "labels per client": 5,
        "train/test split": "75/25",
    }


def convex_setting(methods=("sfedhp", "pfedme", "hierfavg")) -> Setting:
    """Fig. 2: MLR on MNIST (Fashion-MNIST a stand-in), λ = 25 for sFedHP and pFedMe."""
    return Setting(
        data=_figure_data(),
        model=MLR_MODEL,
        rounds=ROUNDS,
        hyper={**_protocol(methods), "λ1 = λ2": FIGURE_LAMBDA, "pFedMe λ": FIGURE_LAMBDA},
        methods=tuple(_label(a) for a in methods),
        seeds=SEEDS,
        stand_ins={"data": MNIST_STAND_IN},
    )


SPARSE_LABEL = "sFedHP (sparse)"


def sparse_setting(with_pfedme: bool = True) -> Setting:
    """Fig. 3: sparse sFedHP (its γ schedule) on MNIST (Fashion-MNIST a stand-in) and the
    network (784-100-10 a stand-in), against pFedMe at λ = 25 when the claim names it."""
    methods = (SPARSE_LABEL, _label("pfedme")) if with_pfedme else (SPARSE_LABEL,)
    hyper = {**_protocol(["sfedhp"]), "λ1 = λ2": FIGURE_LAMBDA, **SPARSE_HYPER}
    if with_pfedme:
        hyper["pFedMe λ"] = FIGURE_LAMBDA
    return Setting(
        data=_figure_data(),
        model=PAPER_MODEL,
        rounds=ROUNDS,
        hyper=hyper,
        methods=methods,
        seeds=SEEDS,
        stand_ins={"data": MNIST_STAND_IN, "model": MODEL_STAND_IN},
    )


def claim_settings() -> list[tuple[str, Setting]]:
    """Every paper claim the page scores, with the setting it needs (docs/sfedhp.md lists
    them): per table, sFedHP's GM and PM at each λ, Table I's two orderings and the λ trend;
    then Figs. 2 and 3."""
    out = []
    for key, table in TABLE_NAMES.items():
        name = f"{key[0]} setting {key[1]}"
        for lam in (5, 15, 20, 25, 30):
            row = {"lambda1": lam, "lambda2": lam}
            for what in ("GM", "PM"):
                out.append(
                    (
                        f"sFedHP's {what} accuracy on {name} at λ = {lam} ({table})",
                        row_setting(key, "sfedhp", row),
                    )
                )
        out.append(
            (
                f"sFedHP has the best GM accuracy of all methods on {name} (Table I)",
                best_gm_setting(key),
            )
        )
        out.append(
            (
                f"Hierarchical FedAvg beats flat FedAvg in GM accuracy on {name} (Table I)",
                hierarchy_setting(key),
            )
        )
        trend = f"sFedHP's GM accuracy rises with λ (Tables II–V, Fig. 4), on {name}"
        out.append((trend, lambda_setting(key)))
    out.append(
        ("Convex (MLR): GM accuracy orders sFedHP ≥ pFedMe ≥ HierFAVG (Fig. 2)", convex_setting())
    )
    out.append(
        (
            "Convex (MLR): sFedHP converges faster than pFedMe (Fig. 2)",
            convex_setting(("sfedhp", "pfedme")),
        )
    )
    out.append(("Sparse sFedHP's density falls to about 20 % (Fig. 3b)", sparse_setting(False)))
    out.append(
        (
            "Sparse sFedHP needs about 80 % fewer cloud-link bits than pFedMe (Fig. 3c)",
            sparse_setting(),
        )
    )
    out.append(("Sparse sFedHP's GM accuracy is similar to pFedMe's (Fig. 3a)", sparse_setting()))
    return out
