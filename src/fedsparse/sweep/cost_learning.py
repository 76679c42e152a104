"""Shard time limits that learn from the runs a sweep has finished, and grow on retries.

The cost model (:mod:`fedsparse.sweep.cost`) estimates a shard job's time from the work its runs
do, at the rates measured on the host that submits the jobs
(:func:`fedsparse.sweep.machine.host_rates`); it errs, by a factor that depends on the algorithm and
the nodes. Every finished run records its measured seconds (``wall_time_s`` of its run
summary), so the time limit of a shard job about to be submitted is the estimate with each
algorithm's runs scaled by that algorithm's median of measured / estimated seconds over the
runs this sweep has finished so far (1 where none has). The evidence is read cheaply:

- the runs tables of the shards that finished (``shards/<shard>.<digest>.runs.parquet``; three
  columns each), each read once per process, and the shards folder rescanned only when it
  changed;
- on a retry (``attempt`` > 1) only, the store entries of the retried shard's own runs (their
  footers): the runs its killed attempt finished, which also leave the retry only the runs the
  store lacks to time.

A shard job killed at its time limit is retried (``retries`` in profiles/slurm) with the limit
times its attempt number, so an underestimated job gets longer each time (and, as the store
keeps every finished run, computes only what is left). ``FEDSPARSE_RUNTIME_SCALE`` multiplies
every shard's time limit (e.g. 1.5 for nodes slower than the submitting host; the tests use a
small value to force a one-minute limit), after the model's 10-minute floor and before the
retry factor; SLURM's smallest limit, 1 minute, bounds it below.
"""

from __future__ import annotations

import math
import os
import statistics
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from ..errors import ConfigError
from ..layout import Layout
from ..results.run_store import stored_summary
from .cost import (
    MIN_RUNTIME_MIN,
    RUN_OVERHEAD_S,
    RUNTIME_SAFETY,
    UNKNOWN_RUNTIME_MIN,
    DataShape,
    RunWork,
    known_shape,
    run_seconds,
    shard_seconds,
)
from .machine import NOMINAL, Rates, host_rates
from .plan import Plan, Run

RUNTIME_SCALE_ENV = "FEDSPARSE_RUNTIME_SCALE"
SLURM_MIN_RUNTIME_MIN = 1  # SLURM counts time limits in whole minutes
# the runs table's columns the evidence needs (fedsparse.results.schema.RUNS_SCHEMA)
EVIDENCE_COLUMNS = ["run_id", "wall_time_s", "final_round", "rounds"]


def runtime_scale(environ: dict[str, str] | None = None) -> float:
    """The factor ``FEDSPARSE_RUNTIME_SCALE`` sets (1 where unset); ConfigError if not > 0."""
    text = (os.environ if environ is None else environ).get(RUNTIME_SCALE_ENV, "").strip()
    if not text:
        return 1.0
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise ConfigError(
            f"{RUNTIME_SCALE_ENV}: must be a number > 0 (factor on shard time limits), got {text!r}"
        )
    return value


def median_ratios(samples: Iterable[tuple[str, float, float]]) -> dict[str, float]:
    """algorithm -> median of measured / estimated seconds, from (algorithm, measured,
    estimated) samples; samples without a positive estimate or a finite measurement are
    left out."""
    ratios: dict[str, list[float]] = defaultdict(list)
    for algorithm, measured, estimated in samples:
        if estimated > 0 and measured is not None and math.isfinite(measured) and measured >= 0:
            ratios[algorithm].append(measured / estimated)
    return {algo: statistics.median(values) for algo, values in ratios.items()}


def scaled_seconds(
    runs: list[Run],
    shape: DataShape,
    work: list[RunWork] | None,
    ratios: dict[str, float],
    rates: Rates = NOMINAL,
) -> float:
    """Estimated seconds of one job running ``runs``, each algorithm's estimate corrected.

    Parameters
    ----------
    runs
        The job's runs, in the order it runs them.
    shape
        Their data set's shape.
    work
        Each run's :class:`fedsparse.sweep.cost.RunWork` where known already (a plan file keeps it),
        None to compute it from the runs' configs.
    ratios
        Algorithm to its measured / estimated ratio (:func:`median_ratios`); an algorithm
        missing has ratio 1.
    rates
        The machine's rates the cost model estimates with.

    Returns
    -------
    float
        The job's start-up plus, for each algorithm, its runs' estimated seconds
        (:func:`fedsparse.sweep.cost.shard_seconds` less the start-up) times its ratio.
    """
    work = [None] * len(runs) if work is None else work
    by_algorithm: dict[str, list[int]] = defaultdict(list)
    for i, run in enumerate(runs):
        by_algorithm[run.config["algorithm"]].append(i)
    total = rates.startup_s
    for algorithm, idx in by_algorithm.items():
        configs = [runs[i].config for i in idx]
        siblings = [runs[i].sibling for i in idx]
        cohorts = [runs[i].cohort for i in idx]  # a cohort's runs are one algorithm's
        seconds = shard_seconds(configs, shape, [work[i] for i in idx], siblings, cohorts, rates)
        seconds -= rates.startup_s
        total += ratios.get(algorithm, 1.0) * seconds
    return total


def limit_minutes(seconds: float, attempt: int = 1, scale: float = 1.0) -> int:
    """A SLURM time limit for a job estimated at ``seconds``.

    Parameters
    ----------
    seconds
        The job's estimated seconds.
    attempt
        The job's attempt (1: the first); values below 1 count as 1.
    scale
        The factor ``FEDSPARSE_RUNTIME_SCALE`` sets (:func:`runtime_scale`).

    Returns
    -------
    int
        Whole minutes: the cost model's limit (3x the estimate, at least 10 minutes), times
        ``scale``, at least 1, times ``attempt``.
    """
    base = max(MIN_RUNTIME_MIN, math.ceil(RUNTIME_SAFETY * seconds / 60))
    return max(SLURM_MIN_RUNTIME_MIN, math.ceil(base * scale)) * max(int(attempt), 1)


class ShardRuntimes:
    """The ``runtime`` resource of the workflow's shard jobs (workflow/rules/run.smk).

    ``learn``: read the evidence of finished runs (the Snakemake process that submits the
    jobs); a cluster job's own Snakemake, whose time limit is set already, does not."""

    def __init__(self, plan: Plan, layout: Layout, learn: bool = True):
        self.plan = plan
        self.layout = layout
        self.learn = learn
        self.scale = runtime_scale()  # read once: a bad value stops the workflow at its start
        self.rates = host_rates() if learn else host_rates(measure_if_missing=False)
        self._samples: dict[str, list[tuple[str, float, float]]] = {}  # runs file -> samples
        self._shards_mtime: int | None = None
        self._shapes: dict[str, DataShape | None] = {}
        self._estimates: dict[tuple, float] = {}
        self._retried: dict[tuple[str, int], tuple[list[Run], list[RunWork] | None, list]] = {}

    def __call__(self, shard: str, data_dir: str | Path, attempt: int = 1) -> int:
        """Minutes of time limit for ``shard``'s job at its ``attempt`` (1: the first)."""
        runs = self.plan.shards[shard]
        dataset = runs[0].dataset
        entry = self.plan.datasets[dataset]
        shape = known_shape(entry["data"], data_dir, entry.get("partition", "natural"))
        if shape is None:  # a real data set not yet built: evaluated again once it is
            return UNKNOWN_RUNTIME_MIN * max(int(attempt), 1)
        self._shapes[dataset] = shape
        work = self.plan.shard_work(shard) if self.plan.shard_work else None
        samples: list[tuple[str, float, float]] = []
        if self.learn:
            self._refresh()
            samples = [s for found in self._samples.values() for s in found]
            if attempt > 1:
                runs, work, own = self._left_to_run(shard, attempt, runs, work, shape)
                samples += own
        ratios = median_ratios(samples)
        seconds = scaled_seconds(runs, shape, work, ratios, self.rates)
        return limit_minutes(seconds, attempt, self.scale)

    def ratios(self) -> dict[str, float]:
        """algorithm -> median measured / estimated seconds over the finished shards' runs."""
        self._refresh()
        return median_ratios(s for found in self._samples.values() for s in found)

    # ------------------------------------------------------------------ evidence
    def _refresh(self) -> None:
        """Read the runs tables of shards that finished since the last look (the folder's
        mtime changes when a shard's outputs are renamed into it)."""
        folder = self.layout.shards
        try:
            mtime = folder.stat().st_mtime_ns
        except FileNotFoundError:
            return
        if mtime == self._shards_mtime:
            return
        self._shards_mtime = mtime
        for shard in self.plan.shards:
            path = self.layout.shard_runs(shard, self.plan.shard_digest(shard))
            key = str(path)
            if key not in self._samples and path.is_file():
                self._samples[key] = self._finished_shard_samples(shard, path)

    def _finished_shard_samples(self, shard: str, path: Path) -> list[tuple[str, float, float]]:
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path, columns=EVIDENCE_COLUMNS).to_pydict()
        except (OSError, ValueError, KeyError):  # unreadable or of another layout: no evidence
            return []
        measured = {
            rid: wall
            for rid, wall, final, rounds in zip(*(table[c] for c in EVIDENCE_COLUMNS), strict=True)
            if final == rounds  # a run that stopped early (diverged) ran fewer rounds
        }
        return self._samples_of(shard, measured)

    def _samples_of(self, shard: str, measured: dict[str, float]) -> list[tuple[str, float, float]]:
        """(algorithm, measured, estimated seconds) of each computation group of ``shard`` (a
        run with the time siblings and cohort members that compute with it) whose runs are
        all in ``measured``: each run's wall_time_s is its share of its group's time, so the
        group's is their sum, against the sum of their estimates."""
        runs = self.plan.shards[shard]
        shape = self._shape(runs[0].dataset)
        if shape is None:
            return []
        work = self.plan.shard_work(shard) if self.plan.shard_work else [None] * len(runs)
        groups: list[list[tuple[Run, RunWork | None]]] = []
        for run, w in zip(runs, work, strict=True):
            if not run.joins or not groups:
                groups.append([])
            groups[-1].append((run, w))
        out = []
        for group in groups:
            if any(run.run_id not in measured for run, _ in group):
                continue
            estimate = 0.0
            for run, w in group:
                if run.sibling:
                    estimate += RUN_OVERHEAD_S
                else:
                    estimate += self._estimate(run, w, shape)
            spent = sum(measured[run.run_id] for run, _ in group)
            out.append((group[0][0].config["algorithm"], spent, estimate))
        return out

    def _estimate(self, run: Run, work: RunWork | None, shape: DataShape) -> float:
        c = run.config
        # a configuration's seeds share its params mapping in a plan made here (plan_sweep)
        member = run.cohort  # a cohort's member after its first
        key = (id(c["params"]), c["rounds"], c.get("eval_every"), c["algorithm"], work, shape)
        key += (member,)
        if key not in self._estimates:
            self._estimates[key] = run_seconds(c, shape, work, self.rates, member=member)
        return self._estimates[key]

    def _shape(self, dataset: str) -> DataShape | None:
        if dataset not in self._shapes:
            entry = self.plan.datasets[dataset]
            build = self.layout.dataset_build(dataset, self.plan.data_digest(dataset))
            self._shapes[dataset] = known_shape(
                entry["data"], build, entry.get("partition", "natural")
            )
        return self._shapes[dataset]

    def _left_to_run(
        self,
        shard: str,
        attempt: int,
        runs: list[Run],
        work: list[RunWork] | None,
        shape: DataShape,
    ) -> tuple[list[Run], list[RunWork] | None, list[tuple[str, float, float]]]:
        """The runs of a retried shard the store lacks, their work, and the evidence of those
        it holds (their footers; read once per attempt)."""
        key = (shard, attempt)
        if key not in self._retried:
            measured = {}
            for run in runs:
                summary = stored_summary(self.layout.store, run.run_id)
                if summary is not None:
                    measured[run.run_id] = summary
            left = [i for i, r in enumerate(runs) if r.run_id not in measured]
            kept = set(left)
            # a run that joins the one before it joins it still where that one is left to
            # compute too (a time sibling alone, or a cohort's member now first, costs in full)
            left_runs = [
                Run(
                    runs[i].run_id,
                    runs[i].config,
                    runs[i].sibling and i - 1 in kept,
                    runs[i].cohort and _earlier_in_group(runs, i, kept),
                )
                for i in left
            ]
            finished = {
                rid: s["wall_time_s"]
                for rid, s in measured.items()
                if s.get("final_round") == s.get("rounds")
            }
            self._retried[key] = (
                left_runs,
                None if work is None else [work[i] for i in left],
                self._samples_of(shard, finished),
            )
        return self._retried[key]


def _earlier_in_group(runs: list[Run], i: int, kept: set[int]) -> bool:
    """Whether a run of ``kept`` comes before run ``i`` in the group of runs it joins."""
    j = i
    while j > 0 and runs[j].joins:
        j -= 1
        if j in kept:
            return True
    return False
