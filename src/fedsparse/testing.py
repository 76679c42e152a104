"""The conformance checks every registered algorithm passes, for a family's own tests.

A family, built in or a plug-in, calls these from its test suite (as optuna ships the tests
its samplers pass); fedsparse runs them on every built-in algorithm. Each check runs the
algorithm on a small synthetic data set and raises AssertionError naming the algorithm and
what broke:

* :func:`check_cohort_bits`: a run's trace is the same bits alone and in a cohort of any size
  and order (all columns but the measured ``elapsed_s``), and an algorithm that fuses nothing
  is planned alone;
* :func:`check_checkpoint_round_trip`: a run (or cohort) stopped right after a checkpoint and
  resumed from it gives the trace and client summary of the run never stopped;
* :func:`check_bad_hyperparameters`: each declared bound, choice and type refused with a
  one-line :class:`~fedsparse.errors.ConfigError` naming the hyperparameter;
* :func:`check_oracle`: the trace equals the family's own plain transcription of its paper's
  pseudo-code (the family writes the oracle; the check runs both and compares);
* :func:`check_algorithm`: the first three at once.

:func:`run_config` writes a toy run's config and :func:`problem_of` gives an oracle the
problem (data, weights, starting point, objective) the run trains.

``params`` is always the algorithm's hyperparameters as a config's ``params`` gives them;
values for the required ones must be in it.
"""

from __future__ import annotations

import logging
import math
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from .algorithms import ALGORITHMS, Hyperparameter
from .errors import ConfigError
from .objective.problem import Problem
from .results.checkpoint import Checkpoint
from .training.cohorts import cohort_key
from .training.config import normalize_run_config, run_id
from .training.experiment import RunResult, load_dataset, run_cohort, run_result

__all__ = [
    "TOY_DATA",
    "check_algorithm",
    "check_bad_hyperparameters",
    "check_checkpoint_round_trip",
    "check_cohort_bits",
    "check_oracle",
    "problem_of",
    "run_config",
    "trace_bits",
]

# A small logistic task: 8 clients of 40 rows in 40 dimensions, 8 of them informative.
TOY_DATA: dict[str, Any] = {
    "kind": "synthetic",
    "task": "logistic",
    "clients": 8,
    "dim": 40,
    "support": 8,
    "samples_per_client": 40,
    "positives": 15,
}


def run_config(
    algorithm: str,
    params: Mapping[str, Any],
    model: Mapping[str, Any] | None = None,
    data: Mapping[str, Any] | None = None,
    rounds: int = 12,
    seed: int = 3,
) -> dict[str, Any]:
    """A normalised run config of ``algorithm`` on a toy data set, every other round scored.

    Parameters
    ----------
    algorithm
        A registered algorithm's name.
    params
        Its hyperparameters.
    model
        The ``model`` config (None: a linear model with the logistic loss).
    data
        The ``dataset`` config (None: :data:`TOY_DATA`).
    rounds, seed
        The run's rounds and seed.

    Returns
    -------
    dict
        The config as a sweep's run has it (:func:`fedsparse.training.config.normalize_run_config`).
    """
    return normalize_run_config(
        {
            "dataset": dict(data or TOY_DATA),
            "model": dict(model or {"loss": "logistic"}),
            "algorithm": algorithm,
            "params": dict(params),
            "rounds": rounds,
            "eval_every": 2,
            "seed": seed,
        }
    )


def problem_of(config: Mapping[str, Any]) -> Problem:
    """The problem a run of ``config`` trains, on the same data set (for an oracle: its
    ``data``, ``p``, ``initial_model()``, ``objective(W)``)."""
    data = load_dataset(config["dataset"], config["model"]["loss"], config["partition"])
    return Problem.from_config(data, config["model"])


def trace_bits(result: RunResult) -> pa.Table:
    """A run's trace as compared bit for bit: without ``elapsed_s`` and the file metadata."""
    return result.trace.drop_columns(["elapsed_s"]).replace_schema_metadata(None)


def check_cohort_bits(
    algorithm: str,
    params: Mapping[str, Any],
    model: Mapping[str, Any] | None = None,
    data: Mapping[str, Any] | None = None,
) -> None:
    """A run's trace is the same bits alone, in a cohort of three and in a cohort of two in
    the other order.

    The cohort varies the first hyperparameter the algorithm fuses (the step size where it
    fuses nothing, each run then alone): a large value that may diverge, ``params``' value
    and a third.

    Parameters
    ----------
    algorithm
        A registered algorithm's name.
    params
        Its hyperparameters, the required ones included.
    model, data
        As :func:`run_config`'s.
    """
    cfgs = _cohort_grid(algorithm, params, model, data)
    keys = {cohort_key(c) for c in cfgs}
    fuses = bool(ALGORITHMS[algorithm].fusable(cfgs[0]["params"]))
    if fuses:
        assert None not in keys and len(keys) == 1, f"{algorithm}: its runs differ in cohort key"
    else:
        assert keys == {None}, f"{algorithm}: fuses nothing but has a cohort key"
    alone = [trace_bits(run_result(c)) for c in cfgs]
    together = [trace_bits(group[0]) for group in run_cohort([[c] for c in cfgs])]
    for i, (a, b) in enumerate(zip(alone, together, strict=True)):
        assert a.equals(b), f"{algorithm}: member {i} of a cohort differs from its run alone"
    if len(cfgs) > 1:  # other positions in the stack
        pair = run_cohort([[cfgs[-1]], [cfgs[0]]])
        assert trace_bits(pair[0][0]).equals(alone[-1]), f"{algorithm}: a reordered cohort"
        assert trace_bits(pair[1][0]).equals(alone[0]), f"{algorithm}: a reordered cohort"


def _cohort_grid(algorithm, params, model, data) -> list[dict[str, Any]]:
    """Configs differing in the first fused hyperparameter (or the step size), deduplicated."""
    cls = ALGORITHMS[algorithm]
    fused = cls.fusable(cls.validate_params(dict(params)))
    name = fused[0] if fused else "stepsize"
    declared = {h.name: h for h in cls.hyperparameters}
    if name not in declared:  # fuses nothing and has no step size: one run
        return [run_config(algorithm, params, model, data, rounds=9, seed=0)]
    h = declared[name]
    base = params.get(name, h.default)
    values = [base * 40, base, base / 3] if name == "stepsize" else [base, base * 2, base / 2]
    if h.high is not None:
        values = [min(v, h.high) for v in values]
    return [
        run_config(algorithm, {**params, name: v}, model, data, rounds=9, seed=0)
        for v in dict.fromkeys(values)
    ]


class _Stopped(Exception):
    """Stands in for the process dying right after a checkpoint write."""


class _StoppedAfter(Checkpoint):
    """A checkpoint written every round, and the run stopped after the one of round ``at``."""

    def __init__(self, path: Path, runs: list[list[str]], at: int):
        super().__init__(path, runs, 1.0, "conformance")
        self.at = at

    def due(self) -> bool:
        return True

    def write(self, round_: int, state: Any, shared: dict[str, Any]) -> None:
        super().write(round_, state, shared)
        if round_ == self.at:
            raise _Stopped


def check_checkpoint_round_trip(
    algorithm: str,
    members: Sequence[Mapping[str, Any]],
    model: Mapping[str, Any] | None = None,
    data: Mapping[str, Any] | None = None,
    rounds: int = 12,
    at: int = 5,
) -> None:
    """A run, or a cohort of runs, stopped right after its checkpoint of round ``at`` and
    resumed from that file gives the uninterrupted traces and client summaries, bit for bit
    (``elapsed_s`` aside), and says it resumed.

    Parameters
    ----------
    algorithm
        A registered algorithm's name.
    members
        Each cohort member's hyperparameters (one: a run alone).
    model, data
        As :func:`run_config`'s.
    rounds, at
        The runs' rounds and the round after whose checkpoint they stop (``0 < at < rounds``).
    """
    computations = [[run_config(algorithm, p, model, data, rounds)] for p in members]
    ids = [[run_id(c) for c in group] for group in computations]
    whole = run_cohort(computations)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "run.ckpt"
        try:
            run_cohort(computations, checkpoint=_StoppedAfter(path, ids, at))
        except _Stopped:
            pass
        else:
            raise AssertionError(f"{algorithm}: no checkpoint written at round {at}")
        with _log_lines("fedsparse.results.checkpoint") as lines:
            resumed = run_cohort(computations, checkpoint=Checkpoint(path, ids, 0.0, "again"))
    said = f"again: resumed from round {at}"
    assert any(said in line for line in lines), f"{algorithm}: no '{said}' in the log: {lines}"
    for i, (a, b) in enumerate(zip(whole, resumed, strict=True)):
        assert trace_bits(a[0]).equals(trace_bits(b[0])), f"{algorithm}: member {i}'s trace"
        assert a[0].client_summary == b[0].client_summary, f"{algorithm}: member {i}'s summary"
    assert all(g[0].trace.num_rows == 1 + rounds // 2 for g in whole), f"{algorithm}: rows"


class _log_lines:
    """Collects the messages of one logger (at INFO and above) while the block runs."""

    def __init__(self, name: str):
        self.logger = logging.getLogger(name)
        self.lines: list[str] = []
        self.handler = logging.Handler(logging.INFO)
        self.handler.emit = lambda record: self.lines.append(record.getMessage())

    def __enter__(self) -> list[str]:
        self.level = self.logger.level
        self.logger.setLevel(logging.INFO)
        self.logger.addHandler(self.handler)
        return self.lines

    def __exit__(self, *exc) -> None:
        self.logger.removeHandler(self.handler)
        self.logger.setLevel(self.level)


def bad_values(h: Hyperparameter) -> list[Any]:
    """Values ``h`` must refuse: below its bound (at it, when open), above its bound, outside
    its choices, of another type."""
    if h.kind is str:
        return [3] + (["not-one-of-the-choices"] if h.choices else [])
    out: list[Any] = ["three", True, float("nan")]
    if h.low is not None:
        out.append(h.low if h.low_open else h.low - (1 if h.kind is int else abs(h.low) / 2 + 1))
    if h.high is not None and math.isfinite(h.high):
        out.append(h.high + (1 if h.kind is int else abs(h.high) / 2 + 1))
    if h.kind is int:
        out.append(1.5)
    return out


def check_bad_hyperparameters(algorithm: str, params: Mapping[str, Any]) -> None:
    """Each of ``algorithm``'s declared hyperparameters refuses every value of
    :func:`bad_values` with a one-line ConfigError that names it.

    Parameters
    ----------
    algorithm
        A registered algorithm's name.
    params
        Valid hyperparameters (the required ones included); each bad value replaces one.
    """
    run_config(algorithm, params)  # the valid ones pass
    for h in ALGORITHMS[algorithm].hyperparameters:
        for value in bad_values(h):
            if h.full_ok and value is None:
                continue
            try:
                run_config(algorithm, {**params, h.name: value})
            except ConfigError as e:
                text = str(e)
                assert "\n" not in text, f"{algorithm}: {h.name}={value!r}: more than one line"
                assert h.name in text, f"{algorithm}: {h.name}={value!r}: {text!r} names not it"
            else:
                raise AssertionError(f"{algorithm}: {h.name}={value!r} was accepted")


def check_oracle(
    config: Mapping[str, Any],
    oracle: Callable[[dict[str, Any]], Mapping[str, Sequence[float]]],
    rtol: float = 1e-9,
    atol: float = 0.0,
) -> None:
    """The run's trace equals the family's plain transcription of the paper's pseudo-code.

    Parameters
    ----------
    config
        A normalised run config (:func:`run_config`); deterministic settings (full batches)
        keep the oracle simple.
    oracle
        The family's transcription: given the config, each trace column it computes (e.g.
        ``objective``) to its value on every evaluated round, round 0 first.
    rtol, atol
        How close each value must be (the kernels' sums run in another order).
    """
    config = dict(config)
    trace = run_result(config).trace
    expected = oracle(config)
    assert expected, f"{config['algorithm']}: the oracle computed no column"
    for column, values in expected.items():
        got = np.asarray(trace.column(column).to_pylist(), dtype=float)
        want = np.asarray(values, dtype=float)
        assert got.shape == want.shape, f"{config['algorithm']}: {column}: {got.shape} rows"
        np.testing.assert_allclose(
            got, want, rtol=rtol, atol=atol, err_msg=f"{config['algorithm']}: {column}"
        )


def check_algorithm(
    algorithm: str,
    params: Mapping[str, Any],
    model: Mapping[str, Any] | None = None,
    data: Mapping[str, Any] | None = None,
) -> None:
    """:func:`check_bad_hyperparameters`, :func:`check_cohort_bits` and
    :func:`check_checkpoint_round_trip` (a run alone) of one algorithm.

    Parameters
    ----------
    algorithm
        A registered algorithm's name.
    params
        Its hyperparameters, the required ones included.
    model, data
        As :func:`run_config`'s.
    """
    check_bad_hyperparameters(algorithm, params)
    check_cohort_bits(algorithm, params, model, data)
    check_checkpoint_round_trip(algorithm, [params], model, data)
