"""Packing a sweep's runs into shards: one process, one cluster job each
(:mod:`fedsparse.shard_runner` runs one).

By default as many shards as ``shard_size`` runs a shard make, cut so that each costs about
the same by the cost model's estimate (:mod:`fedsparse.cost`): a data set of costly runs gets
more of them, and a shard of slow runs is no longer left running alone while the other cores
idle (where a data set's shape is unknown until it is built: by count). With the sweep key
``shard_minutes``, each shard of a data set holds about that many estimated minutes of runs,
so a sweep of short runs makes a few jobs of minutes each rather than many jobs that spend
their time starting up (two Snakemake processes and a Python process with its kernels per
job, seconds each). Either way ``max_shards`` caps the count: past it,
shards grow. A shard holds runs of one data set, in plan order, so the seeds of a
configuration stay together, and a run's time siblings (the same run under time models its
algorithm does not read, computed once: :func:`fedsparse.experiment.run_results`) are never
split between shards.

A shard's digest (:func:`shard_digest`) names what its outputs hold; its files carry it in
their names (:class:`fedsparse.layout.Layout`).
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import json
import math
from pathlib import Path
from typing import Any

from .layout import SHARD_DIGEST_CHARS


def count_bounds(n: int, size: int, siblings: list[bool] | None = None) -> list[tuple[int, int]]:
    """[start, end) of consecutive shards of ``size`` runs (the last one may be smaller); a
    shard grows past ``size`` rather than part a run from the one before it where
    ``siblings[i]`` (it shares that run's computation)."""
    bounds, start = [], 0
    while start < n:
        end = min(start + size, n)
        while siblings is not None and end < n and siblings[end]:
            end += 1
        bounds.append((start, end))
        start = end
    return bounds


def cost_bounds(
    costs: list[float], target: float, siblings: list[bool] | None = None
) -> list[tuple[int, int]]:
    """[start, end) of consecutive shards of about equal estimated cost, as few as hold at
    most ``target`` each: ``ceil(sum / target)`` shards (fewer where there are fewer runs), cut
    where the running sum is nearest each equal share, so no shard is a small remainder; never
    between a run and the one before it where ``siblings[i]``."""
    if siblings is not None and any(siblings):
        starts = [i for i, sibling in enumerate(siblings) if not sibling]  # groups' first runs
        ends = starts[1:] + [len(costs)]
        groups = [math.fsum(costs[a:b]) for a, b in zip(starts, ends, strict=True)]
        return [(starts[a], ends[b - 1]) for a, b in cost_bounds(groups, target)]
    n = len(costs)
    if n == 0:
        return []
    total = math.fsum(costs)
    k = min(n, max(1, math.ceil(total / target)))
    cumulative = list(itertools.accumulate(costs))
    cuts = [0]
    for j in range(1, k):
        share = total * j / k
        i = bisect.bisect_left(cumulative, share)  # the run that reaches the j-th share
        before = cumulative[i - 1] if i else 0.0
        cut = i + 1 if cumulative[i] - share < share - before else i
        cuts.append(min(max(cut, cuts[-1] + 1), n - (k - j)))  # every shard keeps a run
    cuts.append(n)
    return list(itertools.pairwise(cuts))


def pack(
    runs_of: dict[str, list[Any]],
    costs_of: dict[str, list[float] | None],
    shard_size: int,
    max_shards: int,
    target_s: float | None,
    siblings_of: dict[str, list[bool]] | None = None,
) -> dict[str, list[Any]]:
    """Shard name (``<data set>--<k>``) -> its runs.

    ``costs_of`` holds each run's estimated seconds per data set (None where the data set's
    shape is unknown before it is built: its runs go ``shard_size`` a shard); ``target_s``
    the estimated seconds a shard aims at (None: every data set by count); ``siblings_of``
    which runs share the computation of the run before them (kept in its shard).
    """
    siblings_of = siblings_of or {}
    if target_s is None:
        total = sum(len(r) for r in runs_of.values())
        if total > max_shards * shard_size:
            shard_size = math.ceil(total / max_shards)
        shares = balanced_counts(runs_of, costs_of, shard_size, siblings_of)
        shards = {}
        for ds, runs in runs_of.items():
            costs, siblings = costs_of.get(ds), siblings_of.get(ds)
            if ds in shares:
                total_cost = math.fsum(costs)
                bounds = cost_bounds(costs, total_cost / shares[ds] * (1 + 1e-9), siblings)
            else:
                bounds = count_bounds(len(runs), shard_size, siblings)
            for k, (start, end) in enumerate(bounds):
                shards[f"{ds}--{k:04d}"] = runs[start:end]
        return shards
    else:
        wanted = sum(
            math.ceil(len(runs) / shard_size)
            if costs_of[ds] is None
            else math.ceil(math.fsum(costs_of[ds]) / target_s)
            for ds, runs in runs_of.items()
        )
        if wanted > max_shards:  # shards grow, by cost and by count alike
            grow = wanted / max_shards
            target_s, shard_size = target_s * grow, math.ceil(shard_size * grow)
    shards = {}
    for ds, runs in runs_of.items():
        costs = costs_of.get(ds) if target_s is not None else None
        siblings = siblings_of.get(ds)
        bounds = (
            count_bounds(len(runs), shard_size, siblings)
            if costs is None
            else cost_bounds(costs, target_s, siblings)
        )
        for k, (start, end) in enumerate(bounds):
            shards[f"{ds}--{k:04d}"] = runs[start:end]
    return shards


def balanced_counts(
    runs_of: dict[str, list[Any]],
    costs_of: dict[str, list[float] | None],
    shard_size: int,
    siblings_of: dict[str, list[bool]],
) -> dict[str, int]:
    """How many shards each data set of known cost gets when shards are counted by
    ``shard_size``: as many in all as by count, shared out in proportion to the data sets'
    estimated cost (at least one each, at most one a computation), so that a data set of
    costly runs gets more shards than one of cheap runs and every shard costs about the
    same."""
    costed = {ds: math.fsum(c) for ds, c in costs_of.items() if c is not None and c}
    if not costed:
        return {}
    # as many as cutting by count makes (a cut grows past shard_size rather than part a run
    # from those it computes with)
    shards = sum(
        len(count_bounds(len(runs_of[ds]), shard_size, siblings_of.get(ds))) for ds in costed
    )
    total = math.fsum(costed.values()) or 1.0
    cap = {}
    for ds in costed:
        siblings = siblings_of.get(ds) or [False] * len(runs_of[ds])
        cap[ds] = len(siblings) - sum(siblings)  # computations: a shard holds at least one
    # one each, the rest by largest remainder of the data sets' shares of the cost
    out = dict.fromkeys(costed, 1)
    share = {ds: shards * cost / total for ds, cost in costed.items()}
    for _ in range(shards - len(costed)):
        open_ = [ds for ds in costed if out[ds] < cap[ds]]
        if not open_:
            break
        ds = max(open_, key=lambda d: (share[d] - out[d], -list(costed).index(d)))
        out[ds] += 1
    return out


def shard_digest(label: str, run_ids: list[str]) -> str:
    """A short hash of what a shard's outputs hold: its runs (their ids hash their configs)
    under the sweep's label (in every row, and not in the ids). An edit of the sweep that
    changes a shard's runs changes its digest, so the plan asks for files the folder lacks."""
    text = "\n".join([label, *run_ids])
    return hashlib.sha256(text.encode()).hexdigest()[:SHARD_DIGEST_CHARS]


def input_names(root: str | Path, inputs: list[str | Path]) -> list[str]:
    """The aggregate's input files by their names in the results folder ``root``, sorted."""
    return sorted(str(Path(p).relative_to(root)) for p in inputs)


def record_inputs(path: str | Path, inputs: list[str]) -> bool:
    """Write the names of the aggregate's inputs (:func:`input_names`: shard files carry
    their digests) to ``path``, atomically, only where they differ from the file's: return
    whether it was written. The aggregate reads the file, so a plan of other inputs
    (a shard or a study added, dropped or changed) makes it newer than the runs table, and
    Snakemake aggregates again whatever it is asked for (the runs table alone too), with or
    without its records."""
    from .atomic import atomic_write

    path = Path(path)
    text = json.dumps({"inputs": sorted(inputs)}, indent=1) + "\n"
    try:
        if path.read_text() == text:
            return False
    except OSError:  # none yet (or unreadable): written
        pass
    with atomic_write(path) as fh:
        fh.write(text.encode())
    return True
