"""Run configurations: read, validate, fill defaults, and hash into a run id.

A run config is a mapping with keys ``dataset``, ``partition``, ``model``,
``algorithm``, ``params``, ``rounds``, ``seed``, ``eval_every`` (and optional ``sweep``
label and ``divergence_factor``). :func:`normalize_run_config` returns the canonical form: every
default filled in, so two configs that mean the same run hash to the same id.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import yaml

from ..data.defaults import (
    OWN_TEST_SPLIT,
    PARTITION_COMMON,
    PARTITION_DEFAULTS,
    SCOPES,
    TEST_POOLS,
)
from ..data.identity import without_locations
from ..data.kinds import data_kind, kind_of, kinds_listed
from ..defaults import DEFAULT_TIME_MODEL, SWEEP_DEFAULTS
from ..errors import ConfigError, did_you_mean

# The algorithms and the problem (their kernels: numba, scipy) are imported where a run config
# is normalised, not here: a cluster job's own Snakemake imports this module to read the plan.
from ..objective import model as model_layer
from ..values import as_integer, as_number, check_keys, nonempty_string

RUN_KEYS = (
    "sweep",
    "dataset",
    "partition",
    "model",
    "algorithm",
    "params",
    "rounds",
    "seed",
    "eval_every",
    "divergence_factor",
    "time_model",
)
# A run is diverged once its objective exceeds this factor times its round-0 objective (or is
# not finite). At this default the key is left out of the canonical config (run ids unchanged).
DEFAULT_DIVERGENCE_FACTOR = SWEEP_DEFAULTS["divergence_factor"]
# time_model (defaults.DEFAULT_TIME_MODEL): at the default it is left out of the
# canonical config (run ids unchanged).

# Where a file comes from does not change which run it is: results from a mirror, a
# local copy or the site share run ids (the data's SHA-256 is checked instead); nor which data
# folder it is (fedsparse.data.identity).


# YAML 1.2 reads 1e-3 as a number; PyYAML (YAML 1.1) reads it as the string '1e-3' (it wants a
# dot and a signed exponent). Config files are read the YAML 1.2 way, so a step size of 1e-3 is
# the number a user means.
YAML12_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+")


class _Yaml12Loader(yaml.SafeLoader):
    pass


_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(f"^{YAML12_FLOAT.pattern}$"), list("-+.0123456789")
)


def yaml12_numbers(value: Any) -> Any:
    """``value`` with every string that YAML 1.2 reads as a float (1e-3) made that float: for
    configs another YAML 1.1 reader loaded (Snakemake's)."""
    if isinstance(value, str) and YAML12_FLOAT.fullmatch(value):
        return float(value)
    if isinstance(value, list):
        return [yaml12_numbers(v) for v in value]
    if isinstance(value, dict):
        return {k: yaml12_numbers(v) for k, v in value.items()}
    return value


def read_config_file(path: str | Path) -> dict[str, Any]:
    """Parse a YAML or JSON file into a mapping; ConfigError names the file on failure."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config ({exc.strerror})") from None
    try:
        loaded = json.loads(text) if path.suffix == ".json" else yaml.load(text, _Yaml12Loader)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}, line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}, line {mark.line + 1}, column {mark.column + 1}" if mark else f"{path}"
        what = " ".join(
            str(part)
            for part in (getattr(exc, "context", None), getattr(exc, "problem", None))
            if part
        )
        raise ConfigError(
            f"{where}: malformed YAML ({what or ' '.join(str(exc).split())})"
        ) from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: a config must be a mapping of keys to values")
    return loaded


def normalize_run_config(raw: dict[str, Any], like: dict[str, Any] | None = None) -> dict[str, Any]:
    """Validate a run config and return its canonical form (defaults filled in).

    ``like``: the canonical form of a run config that differs from ``raw`` in its ``params``
    alone (a sweep's configurations of one data set, algorithm and time model): only the
    params are normalised and checked, and the rest is ``like``'s (the same objects).
    """
    from ..algorithms import ALGORITHMS
    from ..objective.problem import LOSS_TASKS

    if like is not None:
        cls = ALGORITHMS[like["algorithm"]]
        cfg = {**like, "params": cls.canonical_params(cls.validate_params(raw["params"]))}
        clients = known_clients(cfg["dataset"], cfg["partition"])
        if clients is not None:
            cls.check_clients(cfg["params"], clients)
        return cfg
    if not isinstance(raw, dict):
        raise ConfigError("config: must be a mapping")
    check_keys(raw, RUN_KEYS, "config")
    for key in ("dataset", "algorithm", "params", "rounds"):
        if key not in raw:
            raise ConfigError(f"{key}: required")
    algorithm = raw["algorithm"]
    if algorithm not in ALGORITHMS:
        raise ConfigError(
            f"algorithm: unknown algorithm {algorithm!r}{did_you_mean(algorithm, ALGORITHMS)} "
            f"(known: {', '.join(ALGORITHMS)})"
        )
    dataset = normalize_dataset(raw["dataset"])
    model = normalize_model(with_default_loss(raw.get("model", {}), dataset))
    cfg = {
        "sweep": nonempty_string(raw.get("sweep", "single"), "sweep"),
        "dataset": dataset,
        "partition": None,
        "model": model,
        "algorithm": algorithm,
        "params": ALGORITHMS[algorithm].validate_params(raw["params"]),
        "rounds": as_integer(raw["rounds"], "rounds", low=1),
        "seed": as_integer(raw.get("seed", 0), "seed", low=0),
        "eval_every": as_integer(
            raw.get("eval_every", SWEEP_DEFAULTS["eval_every"]), "eval_every", low=1
        ),
    }
    # e.g. a replayed k sequence, read now (a bad source fails here, not in a job)
    cfg["params"] = ALGORITHMS[algorithm].canonical_params(cfg["params"])
    timing = time_model(raw)
    if timing != DEFAULT_TIME_MODEL:  # at the default: absent, so run ids do not change
        cfg["time_model"] = timing
    factor = divergence_factor(raw)
    if factor != DEFAULT_DIVERGENCE_FACTOR:  # at the default: absent, so run ids do not change
        cfg["divergence_factor"] = factor
    cfg["partition"] = normalize_partition(raw.get("partition"), cfg["dataset"])
    if model["loss"] != "least_squares":
        kind_of(cfg["dataset"]).check_loss(model["loss"], LOSS_TASKS[model["loss"]], cfg["dataset"])
    if model.get("kind") == "cnn":  # layers that cannot fit the images fail before any run
        n_features = model_layer.known_features(cfg["dataset"])
        if n_features is not None:
            model_layer.resolve(model, n_features, 2)
    clients = known_clients(cfg["dataset"], cfg["partition"])
    if clients is not None:
        ALGORITHMS[algorithm].check_clients(cfg["params"], clients)
    return cfg


def known_clients(dataset: dict[str, Any], partition: Any) -> int | None:
    """The client count a normalised config fixes before any data is read (a partitioner's
    ``clients``, a simulation's own clients), or None where only the data can tell."""
    if isinstance(partition, dict) and "clients" in partition:
        return int(partition["clients"])
    if partition == "natural":
        return kind_of(dataset).own_client_count(dataset)
    return None


def divergence_factor(cfg: dict[str, Any]) -> float:
    """The ``divergence_factor`` of a (raw or normalised) run or sweep config, validated."""
    value = as_number(cfg.get("divergence_factor", DEFAULT_DIVERGENCE_FACTOR), "divergence_factor")
    if value <= 1:
        raise ConfigError(f"divergence_factor: must be > 1, got {value!r}")
    return value


def time_model(cfg: dict[str, Any]) -> dict[str, float]:
    """The ``time_model`` of a (raw or normalised) run or sweep config, validated and complete."""
    value = cfg.get("time_model", {})
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise ConfigError("time_model: must be a mapping such as {exchange_time: 10}")
    check_keys(value, tuple(DEFAULT_TIME_MODEL), "time_model")
    return {
        key: as_number(value.get(key, default), f"time_model.{key}", low=0.0)
        for key, default in DEFAULT_TIME_MODEL.items()
    }


def run_id(cfg: dict[str, Any]) -> str:
    """Stable 16-hex-digit id of a normalised run config (the sweep label is not part of it)."""
    return hashlib.sha256(identity_text(cfg).encode()).hexdigest()[:16]


SEED_MARK = 9_876_543_210_123_456_789  # a seed no config uses: where run_ids puts each seed


def run_ids(cfg: dict[str, Any], seeds: list[int]) -> list[str]:
    """``run_id({**cfg, "seed": s})`` for each seed, hashing one identity text with each
    seed put in place (a sweep's seeds share everything else: 50 seeds, one JSON dump)."""
    text = identity_text({**cfg, "seed": SEED_MARK})
    head, tail = text.split(f'"seed":{SEED_MARK}')
    # the text before the seed is hashed once, each seed's hash goes on from a copy of it
    before = hashlib.sha256(f'{head}"seed":'.encode())
    after = tail.encode()
    ids = []
    for s in seeds:
        h = before.copy()
        h.update(b"%d%s" % (int(s), after))
        ids.append(h.hexdigest()[:16])
    return ids


def identity_text(cfg: dict[str, Any]) -> str:
    """The canonical JSON that a run id hashes: the config without the sweep label, with
    locations replaced by the content they name."""
    identity = {k: v for k, v in cfg.items() if k != "sweep"}
    ds = identity.get("dataset")
    if isinstance(ds, dict):
        identity["dataset"] = without_locations(ds)
    init = identity.get("model", {}).get("init", {})
    if init.get("kind") == "file":  # the file's SHA-256 identifies it, not where it lies
        identity["model"] = {**identity["model"], "init": {**init, "path": None}}
    seq = identity.get("params", {}).get("k_sequence")
    if isinstance(seq, dict):  # a replayed k sequence: its content, not where it was read
        identity["params"] = {**identity["params"], "k_sequence": {**seq, "path": None}}
    return json.dumps(identity, sort_keys=True, separators=(",", ":"))


def dataset_name(ds: dict[str, Any]) -> str:
    """The name a dataset config shows in results."""
    return ds["name"] if ds.get("name") else kind_of(ds).name_of(ds)


def default_loss(ds: dict[str, Any]) -> str:
    """The loss a data set gets when its model names none."""
    return kind_of(ds).default_loss(ds)


def with_default_loss(model: Any, ds: dict[str, Any]) -> Any:
    """``model`` with the data's :func:`default_loss` where it names no loss (a softmax for
    images, not least squares on class numbers)."""
    if isinstance(model, dict) and "loss" not in model:
        return {**model, "loss": default_loss(ds)}
    return model


def partition_label(partition: str | dict[str, Any]) -> str:
    """The ``partition`` column of traces and runs: 'natural', 'papers', 'dirichlet-a0.5', ..."""
    if isinstance(partition, str):
        return partition
    kind = partition["kind"]
    label = {
        "dirichlet": f"dirichlet-a{partition.get('alpha', 0):g}",
        "writer_mix": f"writer_mix-w{partition.get('writers')}-a{partition.get('alpha', 0):g}",
        "quantity": f"quantity-a{partition.get('alpha', 0):g}",
        "labels": f"labels-k{partition.get('k', 0)}",
        "label_cycle": (
            f"label_cycle-l{partition.get('labels_per_client')}"
            f"-tr{partition.get('train_per_label')}-te{partition.get('test_per_label')}"
            f"-{partition.get('scope')}"
        ),
    }.get(kind, kind)
    if partition.get("test_fraction"):
        label += f"+test{partition['test_fraction']:g}"
    if partition.get("test_pool") == "pooled":
        label += "+pooled"
    return label


def normalize_dataset(ds: Any) -> dict[str, Any]:
    """The canonical form of a ``dataset`` config: its kind's (fedsparse.data.kinds)."""
    if not isinstance(ds, dict) or "kind" not in ds:
        raise ConfigError(f"dataset: must be a mapping with a 'kind' ({kinds_listed()})")
    return data_kind(ds["kind"]).normalize(ds)


def normalize_partition(value: Any, dataset: dict[str, Any]) -> str | dict[str, Any]:
    """'natural' (the data set's own clients) or a full partitioner mapping."""
    own_clients = kind_of(dataset).own_clients
    if value is None:
        value = "natural" if own_clients else "papers"
    if isinstance(value, str):
        value = {"kind": value}
    if not isinstance(value, dict) or "kind" not in value:
        raise ConfigError("partition: must be a name or a mapping with a 'kind'")
    kind = value["kind"]
    if kind == "natural":
        check_keys(value, ("kind",), "partition")
        if not own_clients:
            raise ConfigError(
                f"partition: {dataset['kind']} data has no clients of its own; choose one of "
                f"{', '.join(PARTITION_DEFAULTS)}"
            )
        return "natural"
    if kind not in PARTITION_DEFAULTS:
        raise ConfigError(
            f"partition.kind: unknown partitioner {kind!r} "
            f"(known: natural, {', '.join(PARTITION_DEFAULTS)})"
        )
    if kind in OWN_TEST_SPLIT:
        defaults = {**PARTITION_DEFAULTS[kind], "seed": PARTITION_COMMON["seed"]}
    else:
        defaults = {**PARTITION_DEFAULTS[kind], **PARTITION_COMMON}
    check_keys(value, ("kind", *defaults, "test_pool"), "partition")
    out = {"kind": kind, **defaults, **{k: v for k, v in value.items() if k != "kind"}}
    _test_pool(out, dataset)
    for key in (
        "clients",
        "writers",
        "clusters",
        "parts",
        "parts_per_client",
        "k",
        "bins",
        "max_tries",
        "labels_per_client",
        "train_per_label",
    ):
        if key in out:
            out[key] = as_integer(out[key], f"partition.{key}", low=1)
    out["seed"] = as_integer(out["seed"], "partition.seed", low=0)
    if kind in OWN_TEST_SPLIT:
        out["test_per_label"] = as_integer(out["test_per_label"], "partition.test_per_label", low=0)
        if out["scope"] not in SCOPES:
            raise ConfigError(f"partition.scope: must be per_client or total, got {out['scope']!r}")
        return out
    out["min_size"] = as_integer(out["min_size"], "partition.min_size", low=1)
    if "alpha" in out:
        out["alpha"] = as_number(out["alpha"], "partition.alpha")
        if out["alpha"] <= 0:
            raise ConfigError(f"partition.alpha: must be > 0, got {out['alpha']!r}")
    out["test_fraction"] = as_number(out["test_fraction"], "partition.test_fraction", low=0.0)
    if out["test_fraction"] >= 1:
        raise ConfigError("partition.test_fraction: must be below 1")
    if out["test_split"] not in ("per_client", "global"):
        raise ConfigError("partition.test_split: must be per_client or global")
    if kind == "papers" and out["cluster_by"] not in ("auto", "kmeans", "labels"):
        raise ConfigError("partition.cluster_by: must be auto, kmeans or labels")
    return out


def _test_pool(out: dict[str, Any], dataset: dict[str, Any]) -> None:
    """Check ``partition.test_pool`` in place; drop it at its default ``split``."""
    pool = out.pop("test_pool", "split")
    if pool not in TEST_POOLS:
        raise ConfigError(f"partition.test_pool: must be split or pooled, got {pool!r}")
    if pool == "split":
        return
    if not kind_of(dataset).test_file:
        raise ConfigError(
            f"partition.test_pool: pooled pools a data set's train and test files; "
            f"{dataset['kind']} data has no test file (use split)"
        )
    # outside label_cycle only a held-out fraction of the pool can test: without one,
    # pooling would leave no test rows at all
    if out["kind"] not in OWN_TEST_SPLIT and not out.get("test_fraction"):
        raise ConfigError(
            f"partition.test_pool: pooled with kind {out['kind']} needs test_fraction > 0 "
            "(the test rows are then held out of the pooled rows)"
        )
    out["test_pool"] = pool


def normalize_model(model: Any) -> dict[str, Any]:
    from ..objective.problem import DEFAULT_L2, LOSS_TASKS

    if not isinstance(model, dict):
        raise ConfigError("model: must be a mapping such as {loss: least_squares}")
    check_keys(model, model_layer.KEYS, "model")
    loss = model.get("loss", "least_squares")
    if loss not in LOSS_TASKS:
        raise ConfigError(
            f"model.loss: unknown loss {loss!r}{did_you_mean(loss, LOSS_TASKS)} "
            f"(known: {', '.join(LOSS_TASKS)})"
        )
    weights = model.get("weights", "uniform")
    if weights not in ("uniform", "samples"):
        raise ConfigError(f"model.weights: must be uniform or samples, got {weights!r}")
    l2 = as_number(model.get("l2", DEFAULT_L2[loss]), "model.l2", low=0.0)
    # structure keys (kind, hidden, ...) only where they differ from a linear model's
    return {"loss": loss, "l2": l2, "weights": weights, **model_layer.normalize(model)}
