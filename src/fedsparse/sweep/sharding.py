"""Packing a sweep's runs into shards: one process, one cluster job each
(:mod:`fedsparse.pipeline.shard_runner` runs one).

By default as many shards as ``shard_size`` runs a shard make, cut so that each costs about
the same by the cost model's estimate (:mod:`fedsparse.sweep.cost`): a data set of costly runs gets
more of them, and a shard of slow runs is no longer left running alone while the other cores
idle (where a data set's shape is unknown until it is built: by count). With the sweep key
``shard_minutes``, each shard of a data set holds about that many estimated minutes of runs,
so a sweep of short runs makes a few jobs of minutes each rather than many jobs that spend
their time starting up (two Snakemake processes and a Python process with its kernels per
job, seconds each). Either way ``max_shards`` caps the count: past it,
shards grow. A shard holds runs of one data set, in plan order, so the seeds of a
configuration stay together, and a run's time siblings (the same run under time models its
algorithm does not read, computed once: :func:`fedsparse.training.experiment.run_results`) are never
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

from ..layout import SHARD_DIGEST_CHARS


def count_bounds(n: int, size: int, siblings: list[bool] | None = None) -> list[tuple[int, int]]:
    """Cut ``n`` runs into consecutive shards of ``size`` runs.

    Parameters
    ----------
    n
        The number of runs.
    size
        Runs a shard holds (the last one may hold fewer).
    siblings
        ``siblings[i]``: run ``i`` shares the computation of run ``i - 1``, so no cut falls
        between them (the shard grows past ``size`` instead). None: no siblings.

    Returns
    -------
    list of tuple of int
        ``[start, end)`` of each shard, in order, covering ``range(n)`` without gaps.
    """
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
    """Cut runs into consecutive shards of about equal estimated cost.

    As few shards as hold at most ``target`` each: ``ceil(sum / target)`` (at most one a run),
    cut where the running sum is nearest each equal share, so no shard is a small remainder.

    Parameters
    ----------
    costs
        Each run's estimated cost, in plan order.
    target
        The cost a shard holds at most, in the units of ``costs`` (> 0).
    siblings
        ``siblings[i]``: run ``i`` shares the computation of run ``i - 1``, so no cut falls
        between them (such a group is cut as one cost). None: no siblings.

    Returns
    -------
    list of tuple of int
        ``[start, end)`` of each shard, in order, covering every run without gaps; each shard
        holds at least one run. Empty for no runs.
    """
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
    """Pack each data set's runs into shards.

    Parameters
    ----------
    runs_of
        Each data set's runs, in plan order.
    costs_of
        Each data set's runs' estimated seconds; None where the data set's shape is unknown
        before it is built (its runs are cut by count).
    shard_size
        Runs a shard holds when cut by count; without ``target_s`` the number of shards is the
        count this makes, shared out between the data sets of known cost by their cost
        (:func:`balanced_counts`).
    max_shards
        The most shards made; past it shards grow (their size and ``target_s`` alike).
    target_s
        The estimated seconds a shard holds at most (the sweep's ``shard_minutes``); None:
        shards counted by ``shard_size``.
    siblings_of
        Each data set's flags of runs that share the computation of the run before them,
        never parted from it. None: no siblings.

    Returns
    -------
    dict
        Shard name ``<data set>--<kkkk>`` (``k`` from 0 within its data set) to its runs: a
        consecutive slice of one data set's runs, data sets in the order of ``runs_of``.
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
    """How many shards each data set of known cost gets when shards are counted by ``shard_size``.

    As many in all as cutting by count makes, shared out in proportion to the data sets'
    estimated cost by largest remainder, so that every shard costs about the same.

    Parameters
    ----------
    runs_of
        Each data set's runs, in plan order.
    costs_of
        Each data set's runs' estimated seconds (None: unknown; that data set is left out).
    shard_size
        Runs a shard holds when cut by count.
    siblings_of
        Each data set's flags of runs that share the computation of the run before them.

    Returns
    -------
    dict
        Data set to its number of shards, for the data sets of known, non-empty costs only:
        at least one each, at most one per computation.
    """
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
    from ..atomic import atomic_write

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
