"""Replayed k sequences (gradient sparsification's ``k_control: sequence``): the recorded run a
``k_sequence`` names, read from its trace where a run config is normalised and again where
the run is built, so the algorithm itself never reads results. The family's algorithms call
these from their ``Algorithm`` hooks of the same names, which generic code calls through the
registry's class:

* :func:`canonical_params` (``config.normalize_run_config``, so when a sweep is planned): reads
  the sequence and writes it as ``{path, run, sha256}``, the content's hash identifying the
  replay (``config.identity_text`` leaves the path out of the run id); the replay must keep
  its source's ``k``.
* :func:`resolved_params` (where an algorithm is built from a run config: ``experiment``,
  ``checks``, the Optuna worker): the same params with ``k_sequence`` resolved to its
  :class:`KSequence`, reread and checked against the hash, which the algorithm replays.

Every problem is a one-line ConfigError naming the key and the file.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from ...errors import ConfigError, FedsparseError
from ...layout import Layout
from ...query.read import read_results, sql_quote


def canonical_params(params: dict[str, Any], where: str = "params") -> dict[str, Any]:
    """Validated params with a replay's ``k_sequence`` read and in its canonical form (other
    params unchanged): a bad source fails the config, not a job later."""
    if params.get("k_control") != "sequence" or "k_sequence" not in params:
        return params
    seq = load_k_sequence(params["k_sequence"], f"{where}.k_sequence")
    if seq.k is not None and params["k"] != seq.k:
        raise ConfigError(
            f"{where}.k: {params['k']} is not the replayed run's k {seq.k} (a replay keeps "
            "its source's k, the trace's label of where the sequence started)"
        )
    return {**params, "k_sequence": seq.canonical()}


def resolved_params(params: dict[str, Any], where: str = "params") -> dict[str, Any]:
    """Canonical params as an algorithm receives them: a replay's ``k_sequence`` resolved to
    the :class:`KSequence` it names (a source changed since the config was normalised is a
    ConfigError); other params are returned as they are."""
    seq = params.get("k_sequence")
    if not isinstance(seq, dict):
        return params
    return {**params, "k_sequence": load_k_sequence(seq, f"{where}.k_sequence")}


@dataclass(frozen=True)
class KSequence:
    """A run's recorded k: ``ks[m - 1]`` is round m's k (a round between two recorded
    ones takes the k of the next recorded round, so exact at every round only for a source
    with eval_every 1); ``sha256`` hashes the recorded (round, k_used) pairs; ``k`` is the
    source's own k hyperparameter (None if it has none)."""

    path: str
    run: str
    sha256: str
    ks: np.ndarray
    k: int | None

    def canonical(self) -> dict[str, str]:
        return {"path": self.path, "run": self.run, "sha256": self.sha256}


def load_k_sequence(value: Any, where: str = "params.k_sequence") -> KSequence:
    """The sequence a ``k_sequence`` value names: 'PATH', 'PATH#RUN_ID', or its canonical
    mapping {path, run, sha256} (then the content must still hash the same). Every problem
    is a one-line ConfigError naming ``where``."""
    if isinstance(value, dict):
        unknown = set(value) - {"path", "run", "sha256"}
        if unknown or not isinstance(value.get("path"), str):
            raise ConfigError(f"{where}: must be 'PATH#RUN_ID' or a mapping {{path, run, sha256}}")
        path, run, expected = value["path"], value.get("run"), value.get("sha256")
    elif isinstance(value, str) and value.strip():
        path, _, run = value.strip().partition("#")
        run, expected = run or None, None
    else:
        raise ConfigError(f"{where}: give the run to replay as 'PATH#RUN_ID', got {value!r}")
    src = Path(path).expanduser()
    stamp = _stamp(src, where)
    seq = _read_sequence(str(src), run, stamp, where)
    seq = KSequence(path, seq.run, seq.sha256, seq.ks, seq.k)
    if expected is not None and expected != seq.sha256:
        raise ConfigError(f"{where}: the k sequence in {path} changed since the config was read")
    return seq


def _stamp(src: Path, where: str) -> tuple[int, int]:
    """A modification stamp of a trace file or results folder (a changed source is reread)."""
    probe = Layout(src).runs if src.is_dir() else src
    try:
        st = probe.stat()
    except OSError:
        raise ConfigError(
            f"{where}: no trace file or results folder at {src} (run the sweep that records "
            "the sequence first)"
        ) from None
    return st.st_mtime_ns, st.st_size


@lru_cache(maxsize=16)
def _read_sequence(src: str, run: str | None, stamp: tuple[int, int], where: str) -> KSequence:
    rows = _sequence_rows(Path(src), run, where)
    runs = sorted(set(rows["run_id"]))
    if not runs:
        which = f"run {run}" if run else "any run"
        raise ConfigError(f"{where}: no k_used rows of {which} in {src}")
    if len(runs) > 1:
        raise ConfigError(
            f"{where}: {src} holds {len(runs)} runs with k_used; name one as PATH#RUN_ID"
        )
    rounds = np.asarray(rows["round"], np.int64)
    ks = np.asarray(rows["k_used"], np.int64)
    order = np.argsort(rounds, kind="stable")
    rounds, ks = rounds[order], ks[order]
    if rounds[0] < 1 or (np.diff(rounds) <= 0).any() or (ks < 1).any():
        raise ConfigError(f"{where}: run {runs[0]} in {src} has a malformed k_used trace")
    digest = hashlib.sha256(np.stack([rounds, ks]).astype("<i8").tobytes()).hexdigest()
    k = next((int(v) for v in rows["k"] if v is not None), None)
    full = np.repeat(ks, np.diff(np.concatenate([[0], rounds])))
    return KSequence(src, runs[0], digest, full, k)


def _sequence_rows(src: Path, run: str | None, where: str) -> dict[str, list]:
    """run_id, round, k, k_used of the trace rows with a k_used, from a folder or a file."""
    cols = ["run_id", "round", "k", "k_used"]
    try:
        if src.is_dir():
            only = f" AND run_id = {sql_quote(run)}" if run else ""
            sql = f"SELECT {', '.join(cols)} FROM traces WHERE k_used IS NOT NULL{only}"
            table = read_results([src], sql)
        else:
            table = pq.read_table(src, columns=cols)
    except (FedsparseError, OSError, ValueError, KeyError) as exc:
        msg = " ".join(str(exc).split())
        raise ConfigError(f"{where}: cannot read a k_used trace from {src} ({msg})") from None
    out = table.to_pydict()
    keep = [
        i
        for i, (r, k) in enumerate(zip(out["run_id"], out["k_used"], strict=True))
        if k is not None and (run is None or r == run)
    ]
    return {c: [out[c][i] for i in keep] for c in cols}
