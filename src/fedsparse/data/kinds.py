"""Data-set kinds: what each ``dataset: {kind: ...}`` takes, how it is normalised and checked,
and what the rest of fedsparse asks of it.

A kind is a :class:`DataKind`, declared once here the way an algorithm declares its
hyperparameters: its fields and their defaults (:mod:`fedsparse.data.defaults`), its
``normalize`` step (every check, each failing as one ConfigError line naming the key), and
the properties other modules read instead of comparing kind names: whether it has clients of
its own, a separate test file, labels whose task the loss gives, rows generated from its
parameters; what its spec fixes before the data is built (name, features, :class:`Facts`);
where it lies (what a run id leaves out); and how its rows are read (``build`` for a data
set built whole with its clients, ``read`` for files that :mod:`fedsparse.data.prepare`
partitions). :data:`DATA_KINDS` holds them by name; :func:`data_kind` and :func:`kind_of`
look one up.

Light at import (fedsparse.training.config reads it in a cluster job's own Snakemake): the readers,
numba and SciPy load inside ``build`` and ``read``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ..errors import ConfigError, did_you_mean
from ..values import as_integer, as_number, check_keys, nonempty_string
from .defaults import (
    CENTERINGS,
    IDX_DEFAULTS,
    IDX_PREPROCESS,
    LEAF_DEFAULTS,
    LEAF_PREPROCESS,
    LIBSVM_DEFAULTS,
    SVMLIGHT_DEFAULTS,
    SYNTHETIC_DEFAULTS,
    SYNTHETIC_READINGS,
    TASKS,
)
from .facts import IMAGE_CLASSES, IMAGE_PIXELS, Facts, idx_file, idx_pixels

# the loss a file's labels get when its model names none, by the data's task
DEFAULT_LOSS = {"regression": "least_squares", "binary": "logistic", "multiclass": "softmax"}
# Where a registry's file comes from does not change what it holds (its SHA-256 is checked
# instead): results from a mirror, a local copy or the site share run ids and data folders.
LOCATION_KEYS = ("path", "mirror")
URL_SCHEMES = ("http://", "https://", "file:")


@dataclass
class Rows:
    """A data set's rows as read from its files, before any partition.

    ``X``, ``y``: the training rows and their labels as the loss reads them; ``X_test``,
    ``y_test``: its own test file (None: none); ``preprocessing``: ``{scale, standardize}``
    applied after the partition picks rows (None: none); ``source``: where the files came
    from; ``client_ptr``, ``test_ptr``: its own clients' rows (None: it has none, a partition
    makes them).
    """

    X: Any
    y: Any
    task: str
    source: dict[str, Any] = field(default_factory=dict)
    X_test: Any = None
    y_test: Any = None
    preprocessing: dict[str, Any] | None = None
    client_ptr: Any = None
    test_ptr: Any = None


@dataclass(frozen=True)
class RegistryRows:
    """The rows a registry file holds, known before it is downloaded: training and test
    rows, and stored values per row (None: dense rows; 0: not recorded)."""

    train: int
    test: int
    values_per_row: float | None = None


class DataKind:
    """Base class: a kind declares ``name`` and ``fields`` and implements
    ``normalized_fields``; the other methods' defaults fit a kind read from one file."""

    name: ClassVar[str]
    fields: ClassVar[dict[str, Any]]  # the keys beside ``kind`` and their defaults (docs)
    own_clients: ClassVar[bool] = True  # ``partition: natural`` means its own clients
    test_file: ClassVar[bool] = False  # its files hold a separate test set (test_pool)
    prepared: ClassVar[bool] = True  # read and partitioned by fedsparse.data.prepare
    labels_from_loss: ClassVar[bool] = False  # the model's loss gives its labels' task
    generated: ClassVar[bool] = False  # its rows come from a generator's parameters

    def normalize(self, ds: dict[str, Any]) -> dict[str, Any]:
        """The canonical form of a ``dataset`` mapping of this kind (defaults filled in, a
        display name set); ConfigError names the first key that is wrong."""
        out = self.normalized_fields(ds)
        if out["name"] is not None:
            nonempty_string(out["name"], "dataset.name")
        out["name"] = out["name"] or self.name_of(out)
        return out

    def normalized_fields(self, ds: dict[str, Any]) -> dict[str, Any]:
        """Every field of ``ds`` checked and its defaults filled in (``name`` as given)."""
        raise NotImplementedError

    def filled(self, ds: dict[str, Any]) -> dict[str, Any]:
        """``ds`` over the defaults of its ``fields``, ``kind`` first."""
        return {"kind": self.name, **self.fields, **{k: v for k, v in ds.items() if k != "kind"}}

    def name_of(self, ds: dict[str, Any]) -> str:
        """The name a normalised config without a ``name`` shows in results."""
        return Path(ds["path"]).stem

    def default_loss(self, ds: dict[str, Any]) -> str:
        """The loss the data gets when its model names none."""
        return DEFAULT_LOSS[ds["task"]]

    def check_loss(self, loss: str, loss_task: str, ds: dict[str, Any]) -> None:
        """Raise ConfigError where a loss does not fit the data's labels.

        Parameters
        ----------
        loss
            The model's loss (not least squares, which fits any labels).
        loss_task
            The task that loss reads (fedsparse.objective.problem.LOSS_TASKS).
        ds
            The normalised data set config.
        """
        if loss_task != ds["task"]:
            raise ConfigError(f"model.loss: {loss} does not fit {ds['task']} data")

    def own_client_count(self, ds: dict[str, Any]) -> int | None:
        """Its own clients' count where the config fixes it (None: only the data tells)."""
        return None

    def known_features(self, ds: dict[str, Any]) -> int | None:
        """The row length its config fixes besides ``n_features`` (None: none)."""
        return None

    def facts(self, ds: dict[str, Any], clients: int | None) -> Facts | None:
        """What the data looks like to a model, where the config fixes it, given the client
        count the partition fixes (None: not fixed); None where only the data can tell."""
        return None

    def without_locations(self, ds: dict[str, Any]) -> dict[str, Any]:
        """The config without where its file lies, where its content is checked instead:
        what run ids and data digests hash."""
        return ds

    def check_path(self, path: str, where: str) -> None:
        """Raise ConfigError unless the local file or folder ``path`` can be read."""
        check_file(path, where)

    def registry_rows(self, ds: dict[str, Any]) -> RegistryRows | None:
        """The rows of its registry file (None: not a registry file)."""
        return None

    def build(self, ds: dict[str, Any], task: str | None) -> Any:
        """A data set built whole with its own clients (``prepared`` False): its
        FederatedData; ``task``: the loss's task where ``labels_from_loss``, else None."""
        raise NotImplementedError

    def read(
        self,
        ds: dict[str, Any],
        cache: str | Path | None,
        download_options: dict[str, Any] | None,
    ) -> Rows:
        """The rows of a kind read from files (``prepared`` True).

        Parameters
        ----------
        ds
            The normalised data set config.
        cache
            The data cache (None: the default).
        download_options
            Options of :func:`fedsparse.data.download.download`; None: its defaults.

        Returns
        -------
        Rows
            Its rows, test file, preprocessing, origin and own clients.

        Raises
        ------
        DataError
            As obtaining the files raises.
        """
        raise NotImplementedError


def check_file(path: str, where: str) -> None:
    """Raise ConfigError unless ``path`` is a readable file (``where``: its config key)."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise ConfigError(f"{where}.path: no such file: {path}")
    if not os.access(p, os.R_OK):
        raise ConfigError(f"{where}.path: cannot read {path} (permission denied)")


def check_folder(path: str, where: str) -> Path:
    """``path`` as a folder; ConfigError unless it is one (``where``: its config key)."""
    p = Path(path).expanduser()
    if not p.is_dir():
        raise ConfigError(f"{where}.path: no such folder: {path}")
    return p


class Synthetic(DataKind):
    """The papers' simulations: clients generated from the config's parameters."""

    name = "synthetic"
    fields = {**SYNTHETIC_DEFAULTS, "center": "none", **SYNTHETIC_READINGS}
    prepared = False
    generated = True

    def normalized_fields(self, ds: dict[str, Any]) -> dict[str, Any]:
        check_keys(ds, ("kind", "center", *SYNTHETIC_DEFAULTS, *SYNTHETIC_READINGS), "dataset")
        given = {k: v for k, v in ds.items() if k not in ("kind", "center", *SYNTHETIC_READINGS)}
        out = {"kind": self.name, **SYNTHETIC_DEFAULTS, **given}
        center = ds.get("center", "none")
        if center not in CENTERINGS:
            raise ConfigError(
                f"dataset.center: must be one of {', '.join(CENTERINGS)}, got {center!r}"
            )
        if center != "none":  # a deviation from the papers: in the run id and the name
            out["center"] = center
        out.update(self._readings(ds))
        if out["task"] not in ("linear", "logistic"):
            raise ConfigError(f"dataset.task: must be linear or logistic, got {out['task']!r}")
        for key in ("clients", "dim", "support", "positives"):
            out[key] = as_integer(out[key], f"dataset.{key}", low=1)
        if out["samples_per_client"] is None:
            out["samples_per_client"] = 100 if out["task"] == "linear" else 1000
        out["samples_per_client"] = as_integer(
            out["samples_per_client"], "dataset.samples_per_client", low=1
        )
        out["seed"] = as_integer(out["seed"], "dataset.seed", low=0)
        for key in ("alpha", "beta", "noise_std"):
            out[key] = as_number(out[key], f"dataset.{key}", low=0.0)
        if out["support"] > out["dim"]:
            raise ConfigError(f"dataset.support: {out['support']} exceeds dataset.dim {out['dim']}")
        if out["task"] == "logistic" and out["positives"] >= out["samples_per_client"]:
            raise ConfigError("dataset.positives: must be below dataset.samples_per_client")
        if not isinstance(out["shared_model"], bool):
            raise ConfigError("dataset.shared_model: must be true or false")
        return out

    @staticmethod
    def _readings(ds: dict[str, Any]) -> dict[str, Any]:
        """The generator readings set away from their defaults (SYNTHETIC_READINGS),
        validated; a key at its default is left out (run ids unchanged)."""
        out: dict[str, Any] = {}
        for key, choices in (
            ("alpha_beta_as", ("variance", "std")),
            ("v_mean", ("client_scalar", "shared_vector")),
        ):
            value = ds.get(key, SYNTHETIC_READINGS[key])
            if value not in choices:
                raise ConfigError(
                    f"dataset.{key}: must be one of {', '.join(choices)}, got {value!r}"
                    f"{did_you_mean(str(value), choices)}"
                )
            if value != SYNTHETIC_READINGS[key]:
                out[key] = value
        u_mean = as_number(ds.get("u_mean", SYNTHETIC_READINGS["u_mean"]), "dataset.u_mean")
        if u_mean != SYNTHETIC_READINGS["u_mean"]:
            out["u_mean"] = u_mean
        return out

    def name_of(self, ds: dict[str, Any]) -> str:
        from .synthetic import reading_suffix

        readings = {k: ds[k] for k in ("center", *SYNTHETIC_READINGS) if k in ds}
        return f"sim-{ds['task']}-a{ds['alpha']:g}-b{ds['beta']:g}" + reading_suffix(**readings)

    def default_loss(self, ds: dict[str, Any]) -> str:
        return "logistic" if ds.get("task") == "logistic" else "least_squares"

    def check_loss(self, loss: str, loss_task: str, ds: dict[str, Any]) -> None:
        """Raise ConfigError where a loss does not fit the simulation's labels.

        Parameters
        ----------
        loss
            The model's loss (not least squares).
        loss_task
            The task that loss reads.
        ds
            The normalised data set config.
        """
        task = "binary" if ds["task"] == "logistic" else "regression"
        if loss_task != task:
            raise ConfigError(f"model.loss: {loss} does not fit synthetic task {ds['task']}")

    def own_client_count(self, ds: dict[str, Any]) -> int | None:
        return int(ds["clients"])

    def known_features(self, ds: dict[str, Any]) -> int | None:
        return int(ds["dim"])

    def facts(self, ds: dict[str, Any], clients: int | None) -> Facts | None:
        task = "regression" if ds["task"] == "linear" else "binary"
        return Facts(task, ds["dim"], 0, clients or ds["clients"])

    def check_path(self, path: str, where: str) -> None:
        return None  # generated: no file

    def build(self, ds: dict[str, Any], task: str | None) -> Any:
        from .synthetic import simulation

        return simulation(**{k: v for k, v in ds.items() if k != "kind"})


class Libsvm(DataKind):
    """A LibSVM file whose rows carry their client as ``qid``."""

    name = "libsvm"
    fields = LIBSVM_DEFAULTS
    prepared = False
    labels_from_loss = True

    def normalized_fields(self, ds: dict[str, Any]) -> dict[str, Any]:
        check_keys(ds, ("kind", *LIBSVM_DEFAULTS), "dataset")
        out = self.filled(ds)
        if not isinstance(out["path"], str) or not out["path"]:
            raise ConfigError("dataset.path: required for kind libsvm (an svmlight file)")
        if out["client_key"] != "qid":
            raise ConfigError("dataset.client_key: only 'qid' is supported")
        if out["n_features"] is not None:
            out["n_features"] = as_integer(out["n_features"], "dataset.n_features", low=1)
        return out

    def default_loss(self, ds: dict[str, Any]) -> str:
        return "least_squares"  # its labels' task comes from the loss

    def check_loss(self, loss: str, loss_task: str, ds: dict[str, Any]) -> None:
        """Any loss fits: the loss gives the labels' task.

        Parameters
        ----------
        loss
            The model's loss.
        loss_task
            The task that loss reads.
        ds
            The normalised data set config.
        """
        return None

    def build(self, ds: dict[str, Any], task: str | None) -> Any:
        from .libsvm import load_qid_file

        return load_qid_file(ds["path"], task, n_features=ds["n_features"], name=ds["name"])


class Svmlight(DataKind):
    """A plain svmlight file (no client ids) from the registry, a URL or a local path; its
    clients come from the partition."""

    name = "svmlight"
    fields = SVMLIGHT_DEFAULTS
    own_clients = False

    def normalized_fields(self, ds: dict[str, Any]) -> dict[str, Any]:
        from . import registry

        check_keys(ds, ("kind", *SVMLIGHT_DEFAULTS), "dataset")
        out = {
            "kind": self.name,
            **SVMLIGHT_DEFAULTS,
            **{k: v for k, v in ds.items() if k != "kind"},
        }
        for key in ("source", "url", "path", "mirror", "task", "sha256"):
            if out[key] is not None:
                nonempty_string(out[key], f"dataset.{key}")
        if out["source"] is None and out["url"] is None and out["path"] is None:
            raise ConfigError(
                "dataset.source: kind svmlight needs a registry source "
                f"({', '.join(registry.DATASETS)}), a url or a path"
            )
        if out["source"] is not None and out["url"] is not None:
            raise ConfigError("dataset.url: give a registry source or a url, not both")
        if out["mirror"] is not None and out["source"] is None:
            raise ConfigError("dataset.mirror: a mirror replaces the LibSVM site for a source")
        for key in ("url", "mirror"):
            if out[key] is not None and not out[key].startswith(URL_SCHEMES):
                raise ConfigError(f"dataset.{key}: must be an http(s):// or file: URL")
        if out["file"] not in ("papers", "train", "test"):
            raise ConfigError(f"dataset.file: must be papers, train or test, got {out['file']!r}")
        if out["source"] is not None:
            entry = registry.get(out["source"])
            entry.file(out["file"])  # the file exists
            if out["task"] is not None and out["task"] != entry.task:
                raise ConfigError(f"dataset.task: {out['source']} is {entry.task} data")
            out["task"] = entry.task
            if out["n_features"] is None:
                out["n_features"] = entry.n_features
            if out["rows"] is None:
                out["rows"] = entry.file(out["file"]).rows
        elif out["task"] not in TASKS:
            raise ConfigError(
                f"dataset.task: required without a source; one of {', '.join(TASKS)}, "
                f"got {out['task']!r}"
            )
        for key in ("n_features", "rows", "size"):
            if out[key] is not None:
                out[key] = as_integer(out[key], f"dataset.{key}", low=1)
        if out["sha256"] is not None:
            out["sha256"] = out["sha256"].lower()
        return out

    def name_of(self, ds: dict[str, Any]) -> str:
        if ds.get("source"):
            return ds["source"]
        where = ds.get("url") or ds["path"]
        name = where.rstrip("/").rsplit("/", 1)[-1]
        for suffix in (".bz2", ".xz"):
            name = name.removesuffix(suffix)
        return name or "svmlight"

    def facts(self, ds: dict[str, Any], clients: int | None) -> Facts | None:
        if clients is None or not ds.get("source"):
            return None
        from . import registry

        entry = registry.DATASETS[ds["source"]]
        n_features = ds.get("n_features") or entry.n_features
        return Facts(entry.task, n_features, entry.classes, clients)

    def without_locations(self, ds: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in ds.items() if k not in LOCATION_KEYS}

    def registry_rows(self, ds: dict[str, Any]) -> RegistryRows | None:
        from . import registry

        entry = registry.DATASETS.get(ds.get("source"))
        if entry is None:
            return None
        rows = entry.file(ds.get("file", "papers")).rows
        return RegistryRows(rows, 0, entry.values_per_row or 0)

    def read(
        self,
        ds: dict[str, Any],
        cache: str | Path | None,
        download_options: dict[str, Any] | None,
    ) -> Rows:
        """The file's rows, labels made the task's (:func:`fedsparse.data.svmlight.obtain`).

        Parameters
        ----------
        ds
            The normalised data set config.
        cache
            The data cache (None: the default).
        download_options
            Options of :func:`fedsparse.data.download.download`; None: its defaults.

        Returns
        -------
        Rows
            Its rows and ``{origin, size, sha256}`` of the file.
        """
        from .libsvm import labels_for_task
        from .svmlight import obtain

        parsed, source = obtain(ds, cache, download_options)
        y = labels_for_task(parsed.y, ds["task"], Path(source["origin"]))
        return Rows(parsed.X, y, ds["task"], source)


class Images(DataKind):
    """Image sets: multiclass, a separate test file, pixels preprocessed."""

    test_file = True
    preprocess: ClassVar[dict[str, Any]]  # the defaults of ``preprocess``

    def normalized_fields(self, ds: dict[str, Any]) -> dict[str, Any]:
        check_keys(ds, ("kind", *self.fields), "dataset")
        out = self.filled(ds)
        for key in ("source", "path", "mirror"):
            if out.get(key) is not None:
                nonempty_string(out[key], f"dataset.{key}")
        if out["task"] != "multiclass":
            raise ConfigError(f"dataset.task: {self.name} data is multiclass, got {out['task']!r}")
        self.check_location(out)
        pre = out["preprocess"] if out["preprocess"] is not None else {}
        if not isinstance(pre, dict):
            raise ConfigError("dataset.preprocess: must be a mapping such as {scale: 255}")
        check_keys(pre, tuple(self.preprocess), "dataset.preprocess")
        pre = {**self.preprocess, **pre}
        pre["scale"] = as_number(pre["scale"], "dataset.preprocess.scale")
        if pre["scale"] <= 0:
            raise ConfigError(f"dataset.preprocess.scale: must be > 0, got {pre['scale']!r}")
        if not isinstance(pre["standardize"], bool):
            raise ConfigError("dataset.preprocess.standardize: must be true or false")
        out["preprocess"] = pre
        return out

    def check_location(self, out: dict[str, Any]) -> None:
        """Raise ConfigError unless the config says where the images are."""
        raise NotImplementedError

    def name_of(self, ds: dict[str, Any]) -> str:
        return Path(ds["path"]).expanduser().name or "images"


class Idx(Images):
    """An image set in the original IDX format (four files, train and test), from the
    registry (``source``) or a local folder (``path``)."""

    name = "idx"
    fields = IDX_DEFAULTS
    preprocess = IDX_PREPROCESS
    own_clients = False

    def check_location(self, out: dict[str, Any]) -> None:
        from . import registry

        if out["source"] is None and out["path"] is None:
            raise ConfigError(
                "dataset.source: kind idx needs a source "
                f"({', '.join(registry.IMAGE_SETS)}) or a path (a folder of IDX files)"
            )
        if out["source"] is not None:
            registry.get_images(out["source"])
        if out["mirror"] is not None:
            if out["source"] is None:
                raise ConfigError("dataset.mirror: a mirror replaces a source's site")
            if not out["mirror"].startswith(URL_SCHEMES):
                raise ConfigError("dataset.mirror: must be an http(s):// or file: URL")

    def name_of(self, ds: dict[str, Any]) -> str:
        return ds["source"] if ds.get("source") else super().name_of(ds)

    def known_features(self, ds: dict[str, Any]) -> int | None:
        return IMAGE_PIXELS if ds.get("source") is not None else None

    def facts(self, ds: dict[str, Any], clients: int | None) -> Facts | None:
        if clients is None:
            return None
        pixels = IMAGE_PIXELS if ds.get("source") else idx_pixels(Path(ds["path"]))
        return None if pixels is None else Facts("multiclass", pixels, IMAGE_CLASSES, clients)

    def without_locations(self, ds: dict[str, Any]) -> dict[str, Any]:
        if not ds.get("source"):
            return ds
        return {k: v for k, v in ds.items() if k not in LOCATION_KEYS}

    def check_path(self, path: str, where: str) -> None:
        if idx_file(check_folder(path, where)) is None:
            raise ConfigError(
                f"{where}.path: {path} holds no train-images-idx3-ubyte[.gz] (an IDX image folder)"
            )

    def registry_rows(self, ds: dict[str, Any]) -> RegistryRows | None:
        from . import registry

        entry = registry.IMAGE_SETS.get(ds.get("source"))
        return None if entry is None else RegistryRows(entry.rows["train"], entry.rows["test"])

    def read(
        self,
        ds: dict[str, Any],
        cache: str | Path | None,
        download_options: dict[str, Any] | None,
    ) -> Rows:
        """The images and labels of the four files (:func:`fedsparse.data.idx.obtain`).

        Parameters
        ----------
        ds
            The normalised data set config.
        cache
            The data cache (None: the default).
        download_options
            Options of :func:`fedsparse.data.download.download`; None: its defaults.

        Returns
        -------
        Rows
            Train and test images, the preprocessing, and ``{origin, files}``.
        """
        from . import idx

        images, source = idx.obtain(ds, cache, download_options)
        return Rows(
            images.X,
            images.y,
            "multiclass",
            source,
            X_test=images.X_test,
            y_test=images.y_test,
            preprocessing=ds["preprocess"],
        )


class Leaf(Images):
    """A folder in LEAF's JSON format (train/*.json, test/*.json), each writer a client."""

    name = "leaf"
    fields = LEAF_DEFAULTS
    preprocess = LEAF_PREPROCESS

    def check_location(self, out: dict[str, Any]) -> None:
        if out["path"] is None:
            raise ConfigError(
                "dataset.path: required for kind leaf (a folder with train/ and test/)"
            )

    def check_path(self, path: str, where: str) -> None:
        p = check_folder(path, where)
        for sub in ("train", "test"):
            if not (p / sub).is_dir():
                raise ConfigError(f"{where}.path: {path} has no {sub}/ folder (LEAF's layout)")

    def read(
        self,
        ds: dict[str, Any],
        cache: str | Path | None,
        download_options: dict[str, Any] | None,
    ) -> Rows:
        """The writers' rows (:func:`fedsparse.data.leaf.load_leaf_dir`); nothing downloads.

        Parameters
        ----------
        ds
            The normalised data set config.
        cache
            The data cache of the converted folder (None: the default).
        download_options
            Not used.

        Returns
        -------
        Rows
            Train and test rows, each writer a client, and ``{origin, users}``.
        """
        from .leaf import load_leaf_dir

        leaf = load_leaf_dir(ds["path"], cache)
        source = {"origin": str(Path(ds["path"]).expanduser()), "users": len(leaf.users)}
        return Rows(
            leaf.X,
            leaf.y,
            "multiclass",
            source,
            X_test=leaf.X_test,
            y_test=leaf.y_test,
            preprocessing=ds["preprocess"],
            client_ptr=leaf.client_ptr,
            test_ptr=leaf.test_ptr,
        )


DATA_KINDS: dict[str, DataKind] = {
    kind.name: kind for kind in (Synthetic(), Libsvm(), Svmlight(), Idx(), Leaf())
}


def data_kind(name: Any) -> DataKind:
    """The kind called ``name``; ConfigError names the known ones (and a close one)."""
    if isinstance(name, str) and name in DATA_KINDS:
        return DATA_KINDS[name]
    raise ConfigError(
        f"dataset.kind: unknown kind {name!r}{did_you_mean(name, tuple(DATA_KINDS))} "
        f"(known: {', '.join(DATA_KINDS)})"
    )


def kind_of(ds: dict[str, Any]) -> DataKind:
    """The kind of a normalised data set config."""
    return data_kind(ds["kind"])


def kinds_listed() -> str:
    """The kinds' names as a sentence lists them: 'a, b or c'."""
    *head, last = DATA_KINDS
    return f"{', '.join(head)} or {last}"


def facts(data: dict[str, Any], partition: Any) -> Facts | None:
    """The task, features, classes and clients of a data set spec, where the config fixes
    them; None where only the built data can tell."""
    clients = partition.get("clients") if isinstance(partition, dict) else None
    if isinstance(partition, dict) and partition.get("kind") == "papers":
        # clusters x parts, parts_per_client parts a client (fedsparse.data.partition)
        parts = partition.get("clusters", 10) * partition.get("parts", 20)
        clients = parts // max(partition.get("parts_per_client", 2), 1)
    return kind_of(data).facts(data, clients)
