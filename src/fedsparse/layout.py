"""Where everything lies in a results folder, in one place.

The workflow's rules, its scripts, the shard runner, the progress line, the Optuna runners,
the readers (query, report, merge) and the CLI all ask :class:`Layout` for a path instead of
spelling out the folder's names. The names are a contract (users, scripts and older results
folders rely on them); tests/test_layout.py pins every one.

A method taking a name (``study_marker(study)``) accepts a Snakemake wildcard too: the rules
say ``L.shard_traces("{shard}", "{digest}")`` and get ``RESULTS/shards/{shard}.{digest}.parquet``.

A shard's files carry, beside its name, the digest of the runs it holds
(:func:`fedsparse.sweep.sharding.shard_digest`): an edited plan asks for files of other names, so
whether a shard is done is read from the folder alone, with or without Snakemake's records.
So does a data set's build, the digest of the spec it was built from
(:func:`fedsparse.data.identity.data_digest`): ``data/<name>.<digest>/``, and ``data/<name>``
a link to its latest build.

A lowest-layer module like :mod:`fedsparse.defaults` (it imports nothing else of the
package): a cluster job's Snakemake reads it before anything else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .defaults import RESULTS_ROOT, sweep_default

PLAN_FILE = "plan.parquet"  # the sweep's plan, beside the shard outputs
CHECKPOINTS = "checkpoints"  # in the run store: the checkpoints of runs in progress
RUNS_FILE = "runs.parquet"  # one row per run
TRACES = "traces"  # the per-round traces, a hive-partitioned Parquet dataset
SHARD_DIGEST_CHARS = 12  # hex digits of a shard's run-list digest in its files' names


@dataclass(frozen=True)
class Layout:
    """The paths of the results folder ``root``."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @classmethod
    def of_sweep(cls, sweep: dict[str, Any]) -> Layout:
        """The layout of a sweep config's results folder (its ``results`` key, default
        ``results/<sweep>``: each config, by its ``sweep`` name, a folder of its own)."""
        return cls(sweep_default(sweep, "results"))

    @classmethod
    def found_in(cls, root: str | Path = RESULTS_ROOT) -> list[Layout]:
        """The results folders (those holding a runs table) in ``root``, by name: each
        sweep's ``root/<sweep>``, and ``root`` itself where it is one (a results folder of a
        version that wrote every sweep to ``results/``)."""
        root = Path(root)
        if not root.is_dir():
            return []
        folders = [root, *sorted(p for p in root.iterdir() if p.is_dir())]
        return [cls(f) for f in folders if cls(f).runs.is_file()]

    # ------------------------------------------------------------------ what readers read
    @property
    def runs(self) -> Path:
        """One row per run (the aggregate's, or a merge's, output)."""
        return self.root / RUNS_FILE

    @property
    def traces(self) -> Path:
        """Every evaluated round of every run: ``traces/dataset=…/algorithm=…/*.parquet``."""
        return self.root / TRACES

    @property
    def report(self) -> Path:
        return self.root / "report"

    @property
    def report_html(self) -> Path:
        return self.report / "index.html"

    @property
    def report_figures(self) -> Path:
        return self.report / "figures"

    @property
    def report_tables(self) -> Path:
        return self.report / "tables"

    # ------------------------------------------------------------------ data sets
    @property
    def data(self) -> Path:
        """The folder of the sweep's built data sets, one folder each."""
        return self.root / "data"

    def dataset(self, name: str) -> Path:
        """The data set's latest build: a link to its :meth:`dataset_build` (a folder, in
        results folders of fedsparse before data digests). Readers that know their config
        ask for the build by digest; this name is for people and the report."""
        return self.data / name

    def dataset_build(self, name: str, digest: str) -> Path:
        """The data set built from the spec of ``digest`` (fedsparse.data.identity)."""
        return dataset_in(self.data, name, digest)

    def datasets_latest(self) -> dict[str, Path]:
        """Data set name -> its latest build, once each: ``data/<name>`` (the link, or a
        folder of a fedsparse before data digests), else a build whose link is gone."""
        if not self.data.is_dir():
            return {}
        found = {p.name: p for p in self.data.iterdir() if not p.name.startswith(".")}
        build = re.compile(rf"(.+)\.[0-9a-f]{{{SHARD_DIGEST_CHARS}}}")
        out = {}
        for name, path in sorted(found.items()):
            match = build.fullmatch(name)
            if match and path.is_dir() and not path.is_symlink():
                if match[1] not in found:
                    out.setdefault(match[1], path)
            elif path.is_dir():
                out[name] = path
        return dict(sorted(out.items()))

    # ------------------------------------------------------------------ grid runs
    @property
    def store(self) -> Path:
        """The run store: each finished run's trace, kept whatever happens to the shards
        (:mod:`fedsparse.results.run_store` names the files in it)."""
        return self.root / "store"

    def checkpoint(self, run_id: str) -> Path:
        """The checkpoint of a run in progress (of a cohort: its first run's id)."""
        return checkpoint_in(self.store, run_id)

    @property
    def shards(self) -> Path:
        return self.root / "shards"

    @property
    def plan_file(self) -> Path:
        return self.shards / PLAN_FILE

    @property
    def aggregate_inputs(self) -> Path:
        """The names of the aggregate's inputs in the plan (fedsparse.sweep.sharding.record_inputs):
        rewritten when they change, so newer than a runs table of other inputs."""
        return self.shards / "aggregate.inputs.json"

    def shard_traces(self, shard: str, digest: str) -> Path:
        """``digest``: of the runs the file holds (fedsparse.sweep.sharding.shard_digest)."""
        return self.shards / f"{shard}.{digest}.parquet"

    def shard_runs(self, shard: str, digest: str) -> Path:
        return self.shards / f"{shard}.{digest}.runs.parquet"

    def shard_outputs(self, shard: str) -> list[Path]:
        """Every output file of ``shard`` in the folder, whatever runs it holds: of any
        digest, and those named without one (fedsparse before digests)."""
        name = re.compile(
            rf"{re.escape(shard)}(\.[0-9a-f]{{{SHARD_DIGEST_CHARS}}})?(\.runs)?\.parquet"
        )
        if not self.shards.is_dir():
            return []
        return sorted(p for p in self.shards.iterdir() if name.fullmatch(p.name))

    @classmethod
    def of_shard_output(cls, shard_output: str | Path) -> Layout:
        """The layout of the results folder a shard output lies in (a shard run by hand
        with outputs of its own naming keeps the store and plan file beside them)."""
        return cls(Path(shard_output).parent.parent)

    # ------------------------------------------------------------------ Optuna studies
    # (the folder's name stays ``optuna``: users and older results folders know it so)
    @property
    def studies(self) -> Path:
        return self.root / "optuna"

    def study(self, study: str) -> Path:
        """A study's folder: its marker, storage, lock, workers' markers and outputs."""
        return self.studies / study

    def study_marker(self, study: str, digest: str | None = None) -> Path:
        """Named by the study's digest (fedsparse.sweep.studies.StudySpec.digest): an edited
        space, sampler or budget asks for a marker the folder lacks. Without one, the name of
        fedsparse before study digests."""
        return self.study(study) / ("study.json" if digest is None else f"study.{digest}.json")

    def study_journal(self, study: str) -> Path:
        return self.study(study) / "journal.log"

    def study_sqlite(self, study: str) -> Path:
        return self.study(study) / "study.db"

    def study_lock(self, study: str) -> Path:
        return self.study(study) / "reserve.lock"

    def study_trial_parts(self, study: str) -> Path:
        """Each finished trial's traces, written by its worker, read by the export."""
        return self.study(study) / "trials"

    def study_checkpoint(self, study: str, run_id: str) -> Path:
        """The checkpoint of a trial's run in progress, by its config's run id (a trial killed
        is retried under another number, with the same configuration)."""
        return self.study(study) / "checkpoints" / f"{run_id}.ckpt"

    def worker_done(self, study: str, worker: str | int) -> Path:
        return self.study(study) / f"worker-{worker}.done"

    def study_traces(self, study: str, part: str) -> Path:
        """``part``: ``trials`` (the export) or ``holdout`` (the re-runs on fresh seeds)."""
        return self.study(study) / f"{part}.parquet"

    def study_runs(self, study: str, part: str) -> Path:
        return self.study(study) / f"{part}.runs.parquet"

    # ------------------------------------------------------------------ logs and benchmarks
    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def benchmarks(self) -> Path:
        return self.root / "benchmarks"

    def data_log(self, dataset: str, digest: str | None = None) -> Path:
        """The log of a data set's build of ``digest`` (named as its folder: Snakemake
        wants a rule's log to have its outputs' wildcards); without one, of a build by
        name (fedsparse before data digests)."""
        return self.logs / "data" / f"{_named(dataset, digest)}.log"

    def data_benchmark(self, dataset: str, digest: str | None = None) -> Path:
        return self.benchmarks / "data" / f"{_named(dataset, digest)}.tsv"

    def shard_log(self, shard: str, digest: str) -> Path:
        """Named as the shard's outputs (Snakemake: a rule's log has its outputs' wildcards)."""
        return self.logs / "shards" / f"{shard}.{digest}.log"

    def shard_benchmark(self, shard: str, digest: str) -> Path:
        return self.benchmarks / "shards" / f"{shard}.{digest}.tsv"

    def study_log(self, study: str, step: str) -> Path:
        """``step``: ``study``, ``worker-<n>``, ``export`` or ``holdout``."""
        return self.logs / "optuna" / study / f"{step}.log"

    def log(self, job: str) -> Path:
        """The log of a one-off job: ``aggregate`` or ``report``."""
        return self.logs / f"{job}.log"

    def benchmark(self, job: str) -> Path:
        return self.benchmarks / f"{job}.tsv"


def _named(name: str, digest: str | None) -> str:
    return name if digest is None else f"{name}.{digest}"


def dataset_in(data: str | Path, name: str, digest: str) -> Path:
    """:meth:`Layout.dataset_build` in the data folder ``data`` (a shard may be given it)."""
    return Path(data) / f"{name}.{digest}"


def checkpoint_in(store: str | Path, run_id: str) -> Path:
    """:meth:`Layout.checkpoint` in the run store ``store`` (a shard may be given its store):
    a folder of its own, which no reader of the store's ``<2 chars>/*.parquet`` enters."""
    return Path(store) / CHECKPOINTS / f"{run_id}.ckpt"
