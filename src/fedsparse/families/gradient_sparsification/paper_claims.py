"""The paper's claims that the gradient-sparsification page scores, and the evidence each needs.

Every claim of Han, Wang and Leung (ICDCS 2020) the page measures is a ``PaperClaim`` in
``CLAIMS``: its text, the quantity measured for it with its tolerance (one of the shared bands of
``report.evidence``) and the ``Setting`` the paper states it at: the data (FEMNIST's 156
writers, sample-weighted aggregation; CIFAR-10's 100 one-class clients for Fig. 8), the model
(the CNN of Wang et al.), the horizon, the hyperparameters (beta, k/D, eta, batch, tau_F,
alpha, M_u, K), every method it names and 5 seeds (the paper states no repeats). The page
derives a ``Ran`` from the runs it compared (``ran_of``: each run's facts from its config,
``run_facts``) and scores a claim only where the runs meet its setting.

Stand-ins, declared once (``STAND_INS``): Fashion-MNIST for FEMNIST, Dirichlet label-skew
clients for its writers, and the 784-100-10 MLP of config/gs-paper.yaml for the CNN; a run of
a stand-in is scored as the stand-in reading, never as the paper's own setting.

The horizon is one rule, ``Setting.rounds``: the paper states none (its figures' x-axes are
lost in the text); the authors' code gives its bandits the horizon T = 5,780 rounds (the spec
reads it as the figures' range). A comparison at a time budget needs its subject (FAB-top-k at
fixed k for Fig. 4, Algorithm 3 for Figs. 5-7, the replayed sequences for the
cross-application) to cover ``HORIZON_ROUNDS`` rounds within the budget. At the paper's k/D
that also covers ``CYCLES`` periodic-k cycles of ceil(D/k) rounds (1,335; the first cycle pays
out the residuals backlogged since round 0), since a periodic-k round costs no more time than a
FAB-top-k one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from ...report.claims import AUTHORS_CODE, PAPER_TEXT
from ...report.evidence import (
    RATIO_FACTOR,
    Band,
    Interval,
    Ran,
    Setting,
    about,
    at_most,
    bootstrap_interval,
    ordering,
    t_interval,
)
from .controllers import HORIZON

__all__ = [
    "CLAIMS",
    "CYCLES",
    "HORIZON_ROUNDS",
    "PaperClaim",
    "STAND_INS",
    "gain_interval",
    "margin_interval",
    "method_label",
    "n_params",
    "ran_of",
    "run_facts",
]

# ---- the paper's setting -------------------------------------------------------------------

PAPER_D, PAPER_K = 444_062, 1000  # the paper's CNN on FEMNIST, Fig. 4's fixed k
CYCLES = 3  # periodic-k cycles of ceil(D/k) rounds a comparison with it needs
HORIZON_ROUNDS = max(HORIZON, CYCLES * math.ceil(PAPER_D / PAPER_K))  # 5,780
PAPER_CNN = "the CNN of Wang et al. (JSAC 2019)"
MLP_STAND_IN = "MLP 784-100-10"
READING_NAMES = {PAPER_TEXT: "the paper's text", AUTHORS_CODE: "the authors' code"}
OURS = "a variation of ours"
FEMNIST = {
    "data": "FEMNIST",
    "clients": 156,
    "partition": "a client per writer",
    "aggregation weights": "C_i/C",
}
# the authors' code deals FEMNIST's writers its own way (partition writer_mix)
FEMNIST_AUTHORS = {**FEMNIST, "partition": "the code's writer mix"}
CIFAR10 = {
    "data": "CIFAR-10",
    "clients": 100,
    "partition": "one class a client",
    "aggregation weights": "C_i/C",
}
STAND_INS = {
    "data": ("Fashion-MNIST", "LEAF's FEMNIST is not on this machine"),
    "partition": ("Dirichlet label skew", "writer-like non-IID clients"),
    "model": (
        MLP_STAND_IN,
        "the paper's CNN takes CPU-hours a run here; config/gs-paper-cnn.yaml runs it",
    ),
}


def _percent(x: float) -> str:
    return f"{100 * x:.3g} %"


K_OVER_D = _percent(PAPER_K / PAPER_D)  # "0.225 %"
SGD = {"η": 0.01, "batch": 32}
FIG4 = {"β": 10.0, "k/D": K_OVER_D, **SGD}
TAU_F = "⌊D/2k⌋"  # FedAvg's local steps at Fig. 4's equal average communication
SEARCH_RANGE = "[0.002 D, D]"
ALG3 = {"α": 1.5, "M_u": 20, "K": SEARCH_RANGE, **SGD}
BETAS = "0.1, 1, 10, 100"
FIG4_RIVALS = ("U-top-k", "periodic-k", "FedAvg", "always-send-all")


@dataclass(frozen=True)
class PaperClaim:
    """A claim of the paper and the evidence it needs: ``text`` (the claims table's), the
    measured quantity ``what`` and its tolerance ``band``, the ``methods`` it names (the
    paper's labels, :func:`method_label`), the hyperparameters ``hyper`` it is stated at, the
    horizon ``rounds`` (None: not held to one), the paper's number ``value`` and ``figure8``:
    the paper states it on CIFAR-10 too (Fig. 8), where runs on CIFAR-10 are judged."""

    text: str
    what: str
    band: Band
    methods: tuple[str, ...] = ()
    hyper: Mapping[str, object] = field(default_factory=dict)
    rounds: int | None = HORIZON_ROUNDS
    value: str = ""
    figure8: bool = False

    def setting(self, reading_kind: str = PAPER_TEXT, data: object = None) -> Setting:
        """The claim's Setting in a reading (the authors' code's: its deal of the writers;
        a variation of ours is held to the paper's text) for runs on ``data``: on CIFAR-10,
        Fig. 8's where the paper states the claim there."""
        if self.figure8 and data == CIFAR10["data"]:
            base, stand = CIFAR10, {}
        elif reading_kind == AUTHORS_CODE:
            base = FEMNIST_AUTHORS
            stand = {k: v for k, v in STAND_INS.items() if k != "partition"}
        else:
            base, stand = FEMNIST, STAND_INS
        reading = READING_NAMES.get(reading_kind, READING_NAMES[PAPER_TEXT])
        return Setting(
            data={"reading": reading, **base},
            model=PAPER_CNN,
            rounds=self.rounds,
            hyper=dict(self.hyper),
            methods=self.methods,
            stand_ins=stand,
        )


def _gain_band(gain: float) -> Band:
    """The ratios' band (``about``) over a relative gain, its text in percent."""
    band = about(gain)
    text = f"≈{gain:.0%} within a factor {RATIO_FACTOR:g}: [{band.lo:.1%}, {band.hi:.1%}]"
    return replace(band, text=text)


CLAIMS = {
    "fig4_loss": PaperClaim(
        "FAB-top-k has a better loss at a fixed time than U-top-k, periodic-k, FedAvg and "
        "always-send-all (Fig. 4)",
        "the smallest margin of a rival's loss over FAB-top-k's",
        ordering("the smallest margin of a rival's loss over FAB-top-k's"),
        ("FAB-top-k", *FIG4_RIVALS),
        {**FIG4, "τ_F": TAU_F},
    ),
    "fig4_accuracy": PaperClaim(
        "FAB-top-k has a better test accuracy at a fixed time than U-top-k, periodic-k, FedAvg "
        "and always-send-all (Fig. 4)",
        "the smallest margin of FAB-top-k's accuracy over a rival's",
        ordering("the smallest margin of FAB-top-k's accuracy over a rival's"),
        ("FAB-top-k", *FIG4_RIVALS),
        {**FIG4, "τ_F": TAU_F},
    ),
    "fig4_fedavg": PaperClaim(
        "FAB-top-k beats FedAvg at equal average communication (Fig. 4)",
        "FedAvg's loss less FAB-top-k's",
        ordering("FedAvg's loss less FAB-top-k's"),
        ("FAB-top-k", "FedAvg"),
        {**FIG4, "τ_F": TAU_F},
    ),
    "fub_similar": PaperClaim(
        "FUB-top-k is similar to FAB-top-k in loss (Fig. 4)",
        "FUB-top-k's loss / FAB-top-k's",
        about(1.0),
        ("FAB-top-k", "FUB-top-k"),
        FIG4,
    ),
    "fab_fair": PaperClaim(
        "FAB-top-k: every client contributes elements every round (|J ∩ J_i| >= floor(k/N)) "
        "(Fig. 4)",
        "⌊k/N⌋ − min |J ∩ J_i|",
        at_most(0, "⌊k/N⌋ − min |J ∩ J_i| over rounds"),
        ("FAB-top-k",),
        FIG4,
        rounds=None,
    ),
    "fub_idle": PaperClaim(
        "FUB-top-k can ignore some clients entirely (Fig. 4)",
        "the most clients left idle in a round",
        ordering("the most clients left idle in a round"),
        ("FUB-top-k",),
        FIG4,
        rounds=None,
    ),
    "fig5_loss": PaperClaim(
        "Algorithm 3 has a better loss than value-based OGD, EXP3 and the continuous bandit "
        "(Fig. 5)",
        "the smallest margin of a rival controller's loss over Algorithm 3's",
        ordering("the smallest margin of a rival controller's loss over Algorithm 3's"),
        ("Algorithm 3", "value-based OGD", "EXP3", "continuous bandit"),
        {"β": 10.0, **ALG3},
    ),
    "fig5_stable": PaperClaim(
        "Algorithm 3's k_m is more stable than EXP3's and the continuous bandit's (Fig. 5)",
        "the smallest margin of a rival's std of log k_m over Algorithm 3's",
        ordering("the smallest margin of a rival's std of log k_m over Algorithm 3's"),
        ("Algorithm 3", "EXP3", "continuous bandit"),
        {"β": 10.0, **ALG3},
    ),
    "fig6": PaperClaim(
        "Algorithm 3 beats Algorithm 2 in loss, with less fluctuation in k_m (Fig. 6, where "
        "the paper shows beta = 100)",
        "the smaller of Algorithm 2's margins over Algorithm 3 in loss and in std of log k_m",
        ordering("the smaller of Algorithm 2's margins in loss and in std of log k_m"),
        ("Algorithm 3", "Algorithm 2"),
        {"β": 100.0, **ALG3},
    ),
    "fig7_k": PaperClaim(
        "Algorithm 3 learns a larger k_m for a smaller beta (Fig. 7)",
        "the smallest log ratio of the late mean k_m at a beta to that at the next larger beta",
        ordering("the smallest log ratio of late mean k_m, smaller beta over the next larger"),
        ("Algorithm 3",),
        {"β": BETAS, **ALG3},
        figure8=True,
    ),
    "fig7_cross": PaperClaim(
        "The k sequence learned at beta is the best sequence at beta (Fig. 7)",
        "the smallest margin of another sequence's loss over the one learned at the beta",
        ordering("the smallest margin of another sequence's loss over the one learned there"),
        (),
        {"β": BETAS, **SGD},
        figure8=True,
    ),
    "headline": PaperClaim(
        "Up to 40 % higher model accuracy for a finite training time (abstract)",
        "the largest relative accuracy gain",
        _gain_band(0.40),
        value="40 %",
    ),
}


# ---- what a run was, in the settings' terms ------------------------------------------------

IMAGE_FEATURES = {"idx": (784, 10), "leaf": (784, 62)}  # (features, classes) under softmax
PARTITIONS = {
    "natural": "the data set's own clients",
    "dirichlet": "Dirichlet label skew",
    "writer_mix": "the code's writer mix",
    "one_class": "one class a client",
}
CNN_LAYERS = (("conv", 32, 5), ("pool", 2), ("conv", 32, 5), ("pool", 2), ("dense", 256))
METHOD_LABELS = {
    "fabtopk": "FAB-top-k",
    "utopk": "U-top-k",
    "fubtopk": "FUB-top-k",
    "periodick": "periodic-k",
    "sendall": "always-send-all",
    "fedavg": "FedAvg",
}
CONTROL_LABELS = {
    "online": "Algorithm 2",
    "online_extended": "Algorithm 3",
    "value_ogd": "value-based OGD",
    "exp3": "EXP3",
    "bandit": "continuous bandit",
}


def _dims(config: dict) -> tuple[int, int] | None:
    """(features, classes) of a run's data set, None when unknown without its files."""
    from ...data.registry import DATASETS

    ds = config.get("dataset") or {}
    kind = ds.get("kind")
    if kind in IMAGE_FEATURES:
        return IMAGE_FEATURES[kind]
    if kind == "synthetic" and ds.get("dim") is not None:
        return int(ds["dim"]), 10
    if kind == "svmlight" and ds.get("source") in DATASETS:  # cifar10, mnist: 10 classes
        return DATASETS[ds["source"]].n_features, 10
    return None


def n_params(config: dict) -> int | None:
    """The model's number of parameters D from a run's config (None when the data set's
    dimensions are not known without its files)."""
    dims = _dims(config)
    if dims is None:
        return None
    d, classes = dims
    model = config.get("model") or {}
    out = classes if model.get("loss") == "softmax" else 1
    bias = bool(model.get("bias", model.get("kind") in ("mlp", "cnn")))
    if model.get("kind") == "cnn":
        from ...objective.model import resolve

        shapes = [layer.params for layer in resolve(model, int(d), out) if layer.params]
        return int(sum(o * i + (o if bias else 0) for o, i in shapes))
    sizes = [int(d), *(model.get("hidden") or []), out] if model.get("kind") == "mlp" else [d, out]
    return int(sum(a * b + (b if bias else 0) for a, b in zip(sizes, sizes[1:], strict=False)))


def _layers(model: dict) -> tuple:
    out = []
    for layer in model.get("layers") or []:
        kind, spec = next(iter(layer.items()))
        if kind == "conv":
            out.append(("conv", spec.get("out"), spec.get("kernel")))
        elif kind == "pool":
            out.append(("pool", spec.get("size")))
        else:
            out.append((kind, spec))
    return tuple(out)


def model_name(config: dict) -> str:
    """The run's model in the settings' words: the paper's CNN (its layers, without the
    parameter-free local response normalisation), 'MLP 784-100-10', 'linear softmax'."""
    model = config.get("model") or {}
    kind, loss = model.get("kind"), model.get("loss", "")
    if kind == "cnn":
        return PAPER_CNN if _layers(model) == CNN_LAYERS else "another CNN"
    dims = _dims(config)
    if kind == "mlp":
        if dims is None:
            return "an MLP"
        out = dims[1] if loss == "softmax" else 1
        return "MLP " + "-".join(str(int(n)) for n in [dims[0], *model.get("hidden", []), out])
    return f"linear {loss}".strip()


def data_name(config: dict) -> str:
    """The run's data set in the settings' words (FEMNIST, Fashion-MNIST, CIFAR-10, ...)."""
    ds = config.get("dataset") or {}
    kind, source = ds.get("kind"), str(ds.get("source") or "")
    if kind == "leaf":
        return "FEMNIST"
    names = {"fashion-mnist": "Fashion-MNIST", "mnist": "MNIST", "cifar10": "CIFAR-10"}
    if source in names:
        return names[source]
    return f"{kind} ({ds.get('name')})" if ds.get("name") else str(kind)


def run_facts(config: dict) -> dict[str, object]:
    """What a run was, by the settings' names: data, clients (its partition's, else its data
    set's), partition, aggregation weights and model."""
    part = config.get("partition")
    part = part if isinstance(part, dict) else {"kind": part}
    clients = part.get("clients") or (config.get("dataset") or {}).get("clients")
    weights = (config.get("model") or {}).get("weights")
    partition = PARTITIONS.get(part.get("kind"), str(part.get("kind") or "none"))
    if part.get("kind") == "natural" and data_name(config) == "FEMNIST":
        partition = FEMNIST["partition"]  # LEAF's FEMNIST: a client per writer
    return {
        "data": data_name(config),
        "clients": int(clients) if clients else None,
        "partition": partition,
        "aggregation weights": "C_i/C" if weights == "samples" else "uniform",
        "model": model_name(config),
    }


FACTS = ("data", "clients", "partition", "aggregation weights")


def method_label(method: str, authors: bool = False) -> str:
    """The paper's name of a page method ('fabtopk', 'fabtopk online_extended', 'fedavg
    (tau=2)', 'fubtopk merge=tree'): in the authors' code's reading fubtopk plays its U_top_K,
    so it is U-top-k, and fubtopk's tree merge its FUB_top_K, so it is FUB-top-k."""
    algorithm, _, control = method.partition(" ")
    if algorithm == "fedavg":
        return METHOD_LABELS["fedavg"]
    if algorithm == "fubtopk" and control == "merge=tree":
        return METHOD_LABELS["fubtopk"] + ("" if authors else " (the code's tree merge)")
    if authors and algorithm == "fubtopk":
        return METHOD_LABELS["utopk"]
    name = METHOD_LABELS.get(algorithm, algorithm)
    control = control.split(" ")[0] if control else ""
    if control in CONTROL_LABELS:
        label = CONTROL_LABELS[control]
        return label if algorithm == "fabtopk" else f"{label} over {name}"
    return name


# ---- the runs behind a measurement ---------------------------------------------------------


def _one(values: Sequence) -> object:
    """One value when every run has it, a tuple of the values when they differ (a Setting
    meets a tuple only when each is its value), None when none has one."""
    seen = []
    for v in values:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        v = v.item() if isinstance(v, np.generic) else v
        if v not in seen:
            seen.append(v)
    if not seen:
        return None
    return seen[0] if len(seen) == 1 else tuple(seen)


def _integer(v):
    """An integer-valued number as an int ('full' and other words as they are; NaN: None)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return v
    if math.isnan(f):
        return None
    return int(f) if f == int(f) else f


def _hyper(rows: pd.DataFrame, name: str) -> object:
    """A hyperparameter of the compared runs ``rows`` (one row per run, the page's frame) by
    the settings' name."""
    fixed = rows[rows["k_control"].isna() | (rows["k_control"] == "fixed")]
    online = rows[rows["k_control"].isin(tuple(CONTROL_LABELS))]
    if name == "β":
        betas = sorted(set(rows["exchange_time"].dropna().astype(float)))
        return betas[0] if len(betas) == 1 else ", ".join(f"{b:g}" for b in betas)
    if name == "η":
        return _one(rows["stepsize"].astype(float))
    if name == "batch":
        return _one([_integer(v) for v in rows["batch_size"]])
    if name == "k/D":
        known = fixed.dropna(subset=["k", "D"])
        ratios = (known["k"].astype(float) / known["D"].astype(float)).tolist()
        return _one([_percent(r) for r in ratios])
    if name == "τ_F":
        return _tau_f(rows)
    extended = online[online["k_control"] == "online_extended"]
    if name == "α":
        return _one([1.5 if pd.isna(v) else float(v) for v in extended["expand"]])
    if name == "M_u":
        return _one([20 if pd.isna(v) else int(v) for v in extended["window"]])
    if name == "K":
        bounds = zip(online["k_min"], online["k_max"], strict=True)
        return _one([_search_range(lo, hi) for lo, hi in bounds])
    raise KeyError(name)


def _search_range(k_min, k_max) -> str:
    lo = 0 if pd.isna(k_min) else int(k_min)
    hi = 0 if pd.isna(k_max) else int(k_max)
    if lo == 0 and hi == 0:
        return SEARCH_RANGE
    return f"[{lo or '0.002 D'}, {hi or 'D'}]"


def _tau_f(rows: pd.DataFrame) -> object:
    """FedAvg's local steps: TAU_F when they are floor(D / 2k) for the fixed k compared (and
    without a FedAvg run, which the setting's methods already find missing)."""
    fedavg = rows[rows["algorithm"] == "fedavg"]
    if fedavg.empty:
        return TAU_F
    ks = rows.loc[(rows["algorithm"] == "fabtopk") & rows["k"].notna(), "k"]
    out = []
    for steps, d in zip(fedavg["local_steps"], fedavg["D"], strict=True):
        if pd.isna(steps):
            continue
        equal = len(ks) and pd.notna(d) and int(steps) == int(d) // (2 * int(ks.iloc[0]))
        out.append(TAU_F if equal else int(steps))
    return _one(out)


def ran_of(
    rows: pd.DataFrame,
    reading_kind: str,
    methods: Sequence[str],
    rounds: float | None,
    claim: PaperClaim,
) -> Ran:
    """What the compared runs ``rows`` (one row per run, with the ``ran_*`` facts of
    :func:`run_facts`, ``seed`` and ``method_label``) were, in ``claim``'s setting's terms:
    ``methods`` the paper's labels of the methods compared, ``rounds`` the rounds the
    claim's subject covered, ``seeds`` the fewest distinct seeds of a compared method."""
    reading = READING_NAMES.get(reading_kind, OURS)
    data = {"reading": reading, **{k: _one(rows[f"ran_{k}"]) for k in FACTS}}
    seeds = rows.groupby("method_label")["seed"].nunique()
    return Ran(
        data=data,
        model=_one(rows["ran_model"]) or "",
        rounds=int(math.floor(rounds)) if rounds is not None and not pd.isna(rounds) else None,
        hyper={name: _hyper(rows, name) for name in claim.hyper},
        methods=tuple(methods),
        seeds=int(seeds.min()) if len(seeds) else 0,
    )


# ---- intervals over seeds ------------------------------------------------------------------


def _clean(values: Sequence[float]) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    return x[~np.isnan(x)]


def margin_interval(
    subject: Sequence[float], rivals: Sequence[Sequence[float]], lower_is_better: bool = True
) -> Interval | None:
    """The smallest margin by which the subject's mean over seeds beats each rival's (a lower
    value: rival less subject; a higher one: subject less rival), with a 95 % bootstrap
    interval over each method's seeds; None when a method has no value."""
    groups = [_clean(subject), *(_clean(r) for r in rivals)]
    if not rivals or any(len(g) == 0 for g in groups):
        return None
    sign = 1.0 if lower_is_better else -1.0

    def smallest(s, *rs):
        return min(sign * (float(np.mean(r)) - float(np.mean(s))) for r in rs)

    return bootstrap_interval(groups, smallest)


def ratio_interval(numerator: Sequence[float], denominator: Sequence[float]) -> Interval | None:
    """mean(numerator) / mean(denominator) over seeds with a 95 % bootstrap interval; None
    when either has no value."""
    groups = [_clean(numerator), _clean(denominator)]
    if any(len(g) == 0 for g in groups):
        return None
    return bootstrap_interval(groups, lambda a, b: float(np.mean(a)) / float(np.mean(b)))


def gain_interval(subject: Sequence[float], rivals: Sequence[Sequence[float]]) -> Interval | None:
    """The relative accuracy gain of the subject over the worst rival, mean(subject) /
    min over rivals of mean(rival) - 1, with a 95 % bootstrap interval; None when a value is
    missing or the worst rival's accuracy is not positive."""
    groups = [_clean(subject), *(_clean(r) for r in rivals)]
    if not rivals or any(len(g) == 0 for g in groups):
        return None
    if min(float(np.mean(g)) for g in groups[1:]) <= 0:
        return None

    def gain(s, *rs):
        worst = min(float(np.mean(r)) for r in rs)
        return float(np.mean(s)) / worst - 1 if worst > 0 else math.nan

    return bootstrap_interval(groups, gain)


def per_seed_interval(values: Sequence[float]) -> Interval | None:
    """The mean of per-seed values with Student's t 95 % interval; None without a value."""
    x = _clean(values)
    return t_interval(x) if len(x) else None


def statistic_interval(
    groups: Sequence[Sequence[float]], statistic: Callable[..., float]
) -> Interval | None:
    """``statistic`` over groups of per-seed values with a 95 % bootstrap interval; None when
    a group has no value."""
    arrays = [_clean(g) for g in groups]
    if not arrays or any(len(g) == 0 for g in arrays):
        return None
    return bootstrap_interval(arrays, statistic)
