"""Study storage (journal file, SQLite, PostgreSQL), the per-study lock, samplers and pruners."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..layout import Layout
from ..sweep.studies import StudySpec, check_url
from .spec import study_spec, write_json

log = logging.getLogger("fedsparse.tune")


def open_storage(spec: StudySpec, results_dir: str | Path):
    """The study's Optuna storage (journal file, SQLite file or the URL in the environment)."""
    import optuna

    st, settings = spec.settings.storage, spec.settings
    layout = Layout(results_dir)
    layout.study(spec.name).mkdir(parents=True, exist_ok=True)
    if st["kind"] == "journal":
        from optuna.storages.journal import JournalFileBackend, JournalStorage

        path = layout.study_journal(spec.name).absolute()
        lock = _FlockJournalLock(f"{path}.flock")
        return JournalStorage(JournalFileBackend(str(path), lock_obj=lock))
    if st["kind"] == "sqlite":
        url = f"sqlite:///{layout.study_sqlite(spec.name).absolute()}"
    else:
        url = os.environ.get(st["url_env"])
        if not url:
            raise ConfigError(
                f"optuna.storage.url_env: environment variable {st['url_env']} is not set "
                "(it must hold the database URL)"
            )
        check_url(url, st["url_env"], settings.n_workers)
    sqlite = url.startswith("sqlite")
    with warnings.catch_warnings():  # heartbeat_interval is experimental in Optuna
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.storages.RDBStorage(
            url,
            engine_kwargs=None if sqlite else {"pool_pre_ping": True},
            # (SQLite: one worker; its own staleness check is enough)
            heartbeat_interval=None if sqlite else settings.heartbeat_interval,
            grace_period=None if sqlite else settings.grace_period,
        )


def _FlockJournalLock(path: str):
    """A journal file lock held with ``flock``: the kernel releases it when its process dies,
    so a worker killed while writing never leaves a stale lock behind (Optuna's own file
    locks wait out a grace period, or spin forever on a relative path)."""
    from optuna.storages.journal._file import BaseJournalFileLock  # (not re-exported)

    class FlockLock(BaseJournalFileLock):
        def __init__(self) -> None:
            self._local = threading.local()

        def acquire(self) -> bool:
            fh = open(path, "a")  # noqa: SIM115 (closed in release)
            fcntl.flock(fh, fcntl.LOCK_EX)
            self._local.fh = fh
            return True

        def release(self) -> None:
            fh = getattr(self._local, "fh", None)
            if fh is not None:
                self._local.fh = None
                fcntl.flock(fh, fcntl.LOCK_UN)
                fh.close()

    return FlockLock()


@contextlib.contextmanager
def study_lock(storage, spec: StudySpec, results_dir: str | Path) -> Iterator[None]:
    """Serialise trial reservation among all workers of a study, for the ``with`` block.

    Parameters
    ----------
    storage
        The study's storage: a PostgreSQL one is locked by a transaction-scoped advisory lock
        (released when its transaction ends or its session dies), any other by an exclusive
        ``flock`` on the study's lock file.
    spec
        The study's spec.
    results_dir
        The results folder holding the study's lock file.
    """
    engine = getattr(storage, "engine", None)
    if engine is not None and engine.dialect.name == "postgresql":
        from sqlalchemy import text

        key = int.from_bytes(hashlib.sha256(spec.name.encode()).digest()[:8], "big", signed=True)
        with engine.begin() as conn:  # released when the transaction ends, or the session dies
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})
            yield
        return
    path = Layout(results_dir).study_lock(spec.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def make_sampler(spec: StudySpec, offset: int = 0):
    """The configured sampler, seeded with seed + ``offset`` (the next trial's number)."""
    import optuna

    s = dict(spec.settings.sampler)
    name, seed = s.pop("name"), s.pop("seed") + offset
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, **s)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "grid":
        grid = {k: p.grid_values() for k, p in spec.space.items()}
        return optuna.samplers.GridSampler(grid, seed=seed)
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed, **s)
    return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False, **s)


def make_pruner(spec: StudySpec):
    import optuna

    p = dict(spec.settings.pruner)
    name = p.pop("name")
    if name == "median":
        return optuna.pruners.MedianPruner(**p)
    if name == "hyperband":
        total = len(spec.seeds) * (spec.rounds + 1)
        return optuna.pruners.HyperbandPruner(
            min_resource=p.get("min_resource", max(1, spec.eval_every)),
            max_resource=total,
            reduction_factor=p.get("reduction_factor", 3),
        )
    return optuna.pruners.NopPruner()


def load_study(spec: StudySpec, storage, offset: int = 0):
    """The stored Optuna study of ``spec``, with its configured sampler and pruner.

    Parameters
    ----------
    spec
        The study's spec.
    storage
        Its storage (:func:`open_storage`).
    offset
        Added to the sampler's seed (the next trial's number).

    Returns
    -------
    optuna.Study

    Raises
    ------
    KeyError
        The storage holds no such study.
    """
    import optuna

    return optuna.load_study(
        study_name=spec.name,
        storage=storage,
        sampler=make_sampler(spec, offset),
        pruner=make_pruner(spec),
    )


def create_study(sweep: dict[str, Any], study: str, results_dir: str | Path, marker=None):
    """Create the study, or check that the stored one matches the config; write ``marker``.

    Holds the study lock while it loads or creates the study.

    Parameters
    ----------
    sweep
        The sweep config.
    study
        The study's name in the sweep's plan.
    results_dir
        The results folder holding the study's storage and lock.
    marker
        A JSON file written atomically (named by the study's digest); the markers of its
        earlier settings (``study*.json`` beside it) are deleted. None: none written.

    Returns
    -------
    optuna.Study

    Raises
    ------
    ConfigError
        The stored study was created with other settings (:func:`check_identity`), or the
        storage's URL is missing or unusable.
    """
    import optuna

    spec = study_spec(sweep, study)
    storage = open_storage(spec, results_dir)
    identity = spec.identity()
    with study_lock(storage, spec, results_dir):
        try:
            s = optuna.load_study(study_name=spec.name, storage=storage)
        except KeyError:
            s = optuna.create_study(
                study_name=spec.name, storage=storage, directions=spec.settings.directions()
            )
            s.set_user_attr("fedsparse", identity)
            log.info("study %s: created (%s storage)", spec.name, spec.settings.storage["kind"])
        else:
            check_identity(s, spec, results_dir)
            log.info("study %s: resuming (%d trials stored)", spec.name, len(s.trials))
    if marker is not None:
        marker = Path(marker)
        for old in marker.parent.glob("study*.json"):  # an earlier settings' marker
            if old.name != marker.name:
                old.unlink(missing_ok=True)
        write_json(marker, {"study": spec.name, "storage": spec.settings.storage})
    return s


def check_identity(s, spec: StudySpec, results_dir: str | Path) -> None:
    """Check that a stored study was created with ``spec``'s settings.

    Never trials of two search spaces in one study. A study of a fedsparse that did not record
    its sampler is checked without it.

    Parameters
    ----------
    s
        The stored Optuna study.
    spec
        The study's spec from the config.
    results_dir
        The results folder, for the message.

    Raises
    ------
    ConfigError
        One line naming the study: its search space, sampler, metric or run settings differ.
    """
    stored = s.user_attrs.get("fedsparse")
    identity = spec.identity()
    if isinstance(stored, dict) and "sampler" not in stored:
        identity.pop("sampler")
    if json.dumps(stored, sort_keys=True) != json.dumps(identity, sort_keys=True):
        where = Layout(results_dir).study(spec.name)
        raise ConfigError(
            f"study {spec.name}: the stored study has a different search space, sampler, "
            "metric or run settings; give the sweep a new name (or delete the study, "
            f"{where}) to start over"
        )
