"""A machine's rates, as the cost model (:mod:`fedsparse.sweep.cost`) charges work against them.

:data:`NOMINAL` are fixed rates of a modest cluster core: the plan packs shards and orders
jobs by them, so a plan is the same on every host. :func:`host_rates` are this machine's,
measured once (a few seconds: matrix products in float64 and float32, a streaming read,
a job's start-up) and cached per host in ``$XDG_CACHE_HOME/fedsparse/machine-<host>.json``;
what a sweep will cost here (``fedsparse check``), its time limits and its progress line use
them. ``FEDSPARSE_MACHINE`` overrides the measurement: ``nominal`` (the fixed rates, e.g. for
tests that compare numbers), or the path of a JSON file of :class:`Rates` fields.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from ..errors import ConfigError

MACHINE_ENV = "FEDSPARSE_MACHINE"
CACHE_VERSION = 1
KERNEL_LOAD_S = 0.5  # CPU of a process's kernels loaded from numba's cache


@dataclass(frozen=True)
class Rates:
    """What one core of a machine does per second, and what a job costs to start.

    Matrix-product rates are one thread's (the network kernels run BLAS on one thread);
    ``bandwidth`` is the rate one core streams float64 values from memory (a sum over an
    array far larger than the caches).
    """

    dgemm: float  # FLOP/s, float64 matrix products of a few hundred rows and columns
    sgemm: float  # FLOP/s, float32
    bandwidth: float  # bytes/s read
    startup_s: float  # a shard job's start in CPU seconds: Snakemake, fedsparse, kernels
    cores: int = 1
    host: str = "nominal"


# A cluster core a few years old, read conservatively; startup includes two Snakemake
# processes and the kernels loaded from numba's cache.
NOMINAL = Rates(dgemm=2.0e10, sgemm=4.0e10, bandwidth=5.0e9, startup_s=8.0, cores=1)


def cache_path(host: str | None = None) -> Path:
    """Where this host's measured rates are kept."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "fedsparse" / f"machine-{host or socket.gethostname()}.json"


def host_rates(measure_if_missing: bool = True) -> Rates:
    """This machine's rates: ``FEDSPARSE_MACHINE``'s, else the cached measurement, else a
    new measurement (cached), else (``measure_if_missing`` false) :data:`NOMINAL`."""
    override = os.environ.get(MACHINE_ENV, "").strip()
    if override == "nominal":
        return NOMINAL
    if override:
        return _read(Path(override), f"{MACHINE_ENV}={override}")
    path = cache_path()
    if path.is_file():
        try:
            return _read(path, str(path))
        except ConfigError:
            pass  # an old or damaged cache is measured again
    if not measure_if_missing:
        return NOMINAL
    rates = measure()
    _write(path, rates)
    return rates


def _read(path: Path, where: str) -> Rates:
    try:
        data = json.loads(path.read_text())
        if data.pop("version", CACHE_VERSION) != CACHE_VERSION:
            raise ValueError("written by another version")
        names = {f.name for f in fields(Rates)}
        rates = Rates(**{k: v for k, v in data.items() if k in names})
    except (OSError, ValueError, TypeError) as exc:
        raise ConfigError(f"{where}: not a file of machine rates ({exc})") from None
    for name in ("dgemm", "sgemm", "bandwidth"):
        if not getattr(rates, name) > 0:
            raise ConfigError(f"{where}: {name} must be > 0")
    return rates


def _write(path: Path, rates: Rates) -> None:
    from ..atomic import atomic_write

    try:
        with atomic_write(path) as fh:
            fh.write(json.dumps({"version": CACHE_VERSION, **asdict(rates)}, indent=1).encode())
    except OSError:
        pass  # a read-only home: measured again next time


def measure() -> Rates:
    """Measure this machine's rates: the best of several tries each, so a busy moment of a
    shared machine costs little."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="blas"):
        rates = {}
        for name, dtype in (("dgemm", np.float64), ("sgemm", np.float32)):
            rng = np.random.default_rng(0)
            a = rng.random((384, 384)).astype(dtype)
            b = rng.random((384, 384)).astype(dtype)
            seconds = _best(lambda a=a, b=b: a @ b, repeats=20)
            rates[name] = 2 * 384**3 / seconds
    x = np.ones(8 * 2**20)  # 64 MB: far past any cache
    rates["bandwidth"] = x.nbytes / _best(x.sum, repeats=20)
    return Rates(
        **rates,
        startup_s=_startup_seconds(),
        cores=os.cpu_count() or 1,
        host=socket.gethostname(),
    )


def _best(fn, repeats: int) -> float:
    """The shortest of ``repeats`` calls of ``fn`` in this thread's CPU time: time the thread
    waited for a core (other processes of a busy machine) is not counted, so rates measured on a
    loaded machine, which the host's cache then keeps, are not too low."""
    best = float("inf")
    for _ in range(repeats):
        start = time.thread_time()
        fn()
        best = min(best, time.thread_time() - start)
    return best


def _startup_seconds() -> float:
    """A shard job's start-up in CPU seconds: a Python process importing fedsparse's run path
    (the cheaper of two tries) and loading its kernels from numba's cache. CPU, not wall
    time: an import that waits (a slow file system, a name lookup) costs the job time but no
    core."""
    import resource

    code = "import fedsparse.training.experiment, fedsparse.objective.problem, pyarrow.parquet"
    best = float("inf")
    for _ in range(2):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        try:
            subprocess.run(
                [sys.executable, "-c", code], check=True, capture_output=True, timeout=120
            )
        except (OSError, subprocess.SubprocessError):
            return NOMINAL.startup_s
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        best = min(best, cpu)
    return best + KERNEL_LOAD_S
