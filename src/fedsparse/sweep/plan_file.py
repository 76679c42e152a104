"""The plan file: a sweep's plan, written once, read by every job in milliseconds.

The workflow plans the sweep once (in the Snakemake process) and writes the plan next to
the shard outputs; each shard job then reads its own runs (a few ms) instead of re-planning
the whole sweep (0.3 s for 10,000 runs, 3 s for 100,000: benchmarks/run.py --only scale).
One Parquet file: columns shard, run_id, config (the normalised run config as JSON), one row
group per shard, so a job reads the footer and its own row group only.

Its place in a results folder is :attr:`fedsparse.layout.Layout.plan_file`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

# Light at import, as the planner (fedsparse.sweep.plan): a cluster job's own Snakemake reads
# the plan file.
from ..errors import FedsparseError
from ..training.config import SEED_MARK
from .cost import RunWork, run_work
from .plan import Plan, Run

# 2: the data sets in the metadata, for jobs that read the plan; 3: each run's steps per round
# (fedsparse.sweep.cost.run_work), so a job's Snakemake sizes its job without the algorithms; 4:
# each run's sibling flag; 5: each run's model support (cost.RunWork), beside its steps
# 6: each shard's digest (Plan.shard_digest), for a job's Snakemake
# 7: each run's cohort flag (fedsparse.training.cohorts); 8: the rest of its cost.RunWork
# 10: its active_set flag
PLAN_FILE_VERSION = "10"
WORK_COLUMNS = [  # cost.RunWork's fields, as the plan file keeps them
    ("steps", "int32"),
    ("support", "int32"),  # null: a dense model
    ("clients", "int32"),  # null: every client
    ("passes", "float32"),
    ("states", "float32"),
    ("evaluations", "float32"),
    ("probes", "float32"),
    ("offered_share", "float32"),
    ("selections", "float32"),
    ("tanh_passes", "float32"),
    ("active_set", "bool"),
]


class PlanFileError(FedsparseError):
    """A plan file is missing, unreadable, or written for another sweep config or shard."""


def sweep_digest(sweep: dict[str, Any]) -> str:
    """SHA-256 of the sweep config as canonical JSON: the config a plan file was made from."""
    text = json.dumps(sweep, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def write_plan_file(plan: Plan, sweep: dict[str, Any], path: str | Path) -> bool:
    """Write a sweep's plan to its plan file, atomically, unless the file already holds it.

    One row group per shard, in the plan's order (a job reads its own only).

    Parameters
    ----------
    plan
        The plan (:func:`fedsparse.sweep.plan_sweep`).
    sweep
        The sweep config it was planned from (its digest marks the file).
    path
        The plan file.

    Returns
    -------
    bool
        True if the file was written; False, untouched, when it already holds this very plan
        (same config and version, same shards, run ids and cohorts).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..atomic import atomic_write

    path = Path(path)
    digest = _plan_digest(plan, sweep)
    if _file_metadata(path).get(b"fedsparse_plan_digest") == digest.encode():
        return False
    schema = pa.schema(
        [
            ("shard", pa.string()),
            ("run_id", pa.string()),
            ("config", pa.string()),
            *((name, pa.type_for_alias(kind)) for name, kind in WORK_COLUMNS),
            ("sibling", pa.bool_()),
            ("cohort", pa.bool_()),
        ],
        metadata={
            b"fedsparse_plan": PLAN_FILE_VERSION.encode(),
            b"fedsparse_sweep_digest": sweep_digest(sweep).encode(),
            b"fedsparse_plan_digest": digest.encode(),
            b"fedsparse_shards": json.dumps(list(plan.shards)).encode(),  # row group order
            b"fedsparse_shard_digests": json.dumps(
                [plan.shard_digest(shard) for shard in plan.shards]
            ).encode(),
            b"fedsparse_plan_name": plan.name.encode(),
            b"fedsparse_datasets": json.dumps(plan.datasets).encode(),
        },
    )
    texts = _ConfigTexts()
    work: dict[tuple[int, str], RunWork] = {}  # a configuration's seeds share its params object
    with atomic_write(path) as fh, pq.ParquetWriter(fh, schema, compression="zstd") as writer:
        for shard, runs in plan.shards.items():
            keys = [(id(r.config["params"]), r.config["algorithm"]) for r in runs]
            for key, r in zip(keys, runs, strict=True):
                if key not in work:
                    work[key] = run_work(r.config)
            part = {
                "shard": [shard] * len(runs),
                "run_id": [r.run_id for r in runs],
                "config": [texts(r.config) for r in runs],  # key order kept
                **{name: [getattr(work[key], name) for key in keys] for name, _ in WORK_COLUMNS},
                "sibling": [r.sibling for r in runs],
                "cohort": [r.cohort for r in runs],
            }
            writer.write_table(pa.table(part, schema=schema), row_group_size=len(runs))
    return True


class _ConfigTexts:
    """``json.dumps(config)`` of a plan's run configs, one dump per configuration: its seeds'
    configs share every other value (plan_sweep), and differ in the text only there."""

    def __init__(self):
        self.templates: dict[tuple[int, ...], tuple[str, str]] = {}

    def __call__(self, config: dict[str, Any]) -> str:
        rest = config.copy()
        del rest["seed"]
        key = tuple(map(id, rest.values()))
        if key not in self.templates:
            text = json.dumps({**config, "seed": SEED_MARK})
            head, tail = text.split(f'"seed": {SEED_MARK}')
            self.templates[key] = (head, tail)
        head, tail = self.templates[key]
        return f'{head}"seed": {int(config["seed"])}{tail}'


def read_plan(path: str | Path, sweep: dict[str, Any]) -> Plan:
    """The plan in the plan file ``path`` as a :class:`Plan` whose shards' runs are read on
    first use (one row group each): what a cluster job's own Snakemake needs, in
    milliseconds whatever the sweep's size. PlanFileError as :func:`read_plan_shard`."""
    meta = _plan_metadata(Path(path), sweep)
    try:
        names = json.loads(meta[b"fedsparse_shards"])
        digests = json.loads(meta[b"fedsparse_shard_digests"])
        plan = Plan(
            name=meta[b"fedsparse_plan_name"].decode(),
            datasets=json.loads(meta[b"fedsparse_datasets"]),
            digests=dict(zip(names, digests, strict=True)),
        )
    except (KeyError, ValueError, TypeError) as exc:
        raise PlanFileError(f"{path}: cannot read the plan ({exc})") from None
    plan.shards = _ShardsOnDemand(names, lambda shard: read_plan_shard(path, shard, sweep))
    plan.shard_work = lambda shard: _shard_work(path, shard, sweep)
    return plan


def _shard_work(path: str | Path, shard: str, sweep: dict[str, Any]) -> list[RunWork]:
    names = [name for name, _ in WORK_COLUMNS]
    part = _read_part(path, shard, sweep, names)
    return [RunWork(*w) for w in zip(*(part[name] for name in names), strict=True)]


class _ShardsOnDemand(dict):
    """Shard name -> runs, each shard's runs read when first asked for."""

    def __init__(self, names: list[str], read):
        super().__init__((name, None) for name in names)
        self._read = read

    def __getitem__(self, shard: str) -> list[Run]:
        runs = super().__getitem__(shard)
        if runs is None:
            runs = self._read(shard)
            super().__setitem__(shard, runs)
        return runs

    def values(self):
        return [self[name] for name in self]

    def items(self):
        return [(name, self[name]) for name in self]


def read_plan_shard(path: str | Path, shard: str, sweep: dict[str, Any]) -> list[Run]:
    """The runs of ``shard`` from the plan file ``path``, reading only its row group.

    Parameters
    ----------
    path
        The plan file.
    shard
        The shard's name.
    sweep
        The sweep config the file must have been planned from.

    Returns
    -------
    list of Run
        The shard's runs in plan order, with their sibling and cohort flags.

    Raises
    ------
    PlanFileError
        Naming the file and the reason: it is missing or unreadable, of another plan file
        version, planned from another sweep config, or holds no such shard.
    """
    part = _read_part(path, shard, sweep, ["run_id", "config", "sibling", "cohort"])
    flags = zip(part["sibling"], part["cohort"], strict=True)
    return [
        Run(rid, json.loads(c), sibling, cohort)
        for rid, c, (sibling, cohort) in zip(part["run_id"], part["config"], flags, strict=True)
    ]


def _read_part(path: str | Path, shard: str, sweep: dict[str, Any], columns: list[str]):
    """``columns`` of ``shard``'s row group in the plan file ``path``, as lists by name."""
    import pyarrow.parquet as pq

    path = Path(path)
    try:
        shards = json.loads(_plan_metadata(path, sweep)[b"fedsparse_shards"])
        if shard not in shards:
            raise PlanFileError(f"{path}: no shard {shard!r} in this plan")
        with pq.ParquetFile(path) as f:
            part = f.read_row_group(shards.index(shard), columns=columns)
    except (OSError, KeyError, ValueError) as exc:  # missing, truncated, not Parquet
        raise PlanFileError(f"{path}: cannot read the plan ({exc})") from None
    return {name: part.column(name).to_pylist() for name in columns}


def _plan_metadata(path: Path, sweep: dict[str, Any]) -> dict[bytes, bytes]:
    """The metadata of the plan file ``path``, checked to be this version's plan of
    ``sweep`` (PlanFileError naming the file and the reason otherwise)."""
    import pyarrow.parquet as pq

    if not path.is_file():
        raise PlanFileError(f"{path}: no plan file")
    try:
        meta = pq.read_schema(path).metadata or {}
    except (OSError, ValueError) as exc:  # truncated, not Parquet
        raise PlanFileError(f"{path}: cannot read the plan ({exc})") from None
    if meta.get(b"fedsparse_plan") != PLAN_FILE_VERSION.encode():
        raise PlanFileError(f"{path}: not a plan file of this fedsparse version")
    if meta.get(b"fedsparse_sweep_digest") != sweep_digest(sweep).encode():
        raise PlanFileError(f"{path}: planned from another sweep config (stale)")
    return meta


def _plan_digest(plan: Plan, sweep: dict[str, Any]) -> str:
    """What a plan file holds, in brief: the config, and every shard's run ids (which hash
    the run configs, so a code change that alters a config changes the digest too)."""
    h = hashlib.sha256(f"{PLAN_FILE_VERSION}:{sweep_digest(sweep)}".encode())
    for shard, runs in plan.shards.items():
        cohorts = [i for i, r in enumerate(runs) if r.cohort]  # how its runs compute together
        h.update(json.dumps([shard, [r.run_id for r in runs], cohorts]).encode())
    return h.hexdigest()


def _file_metadata(path: Path) -> dict[bytes, bytes]:
    import pyarrow.parquet as pq

    try:
        return pq.read_schema(path).metadata or {}
    except (OSError, ValueError):  # missing or unreadable: rewritten
        return {}


def plan_from_file(path: str | Path, sweep: dict[str, Any]) -> Plan | None:
    """:func:`read_plan` for the Snakefile of a cluster job: None (plan it then) where the
    plan file is missing or stale."""
    try:
        return read_plan(path, sweep)
    except PlanFileError:
        return None
