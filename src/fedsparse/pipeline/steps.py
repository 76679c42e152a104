"""The workflow's steps as plain functions (the Snakemake scripts only call these)."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numba

from ..atomic import atomic_write
from ..data import save_dataset
from ..data.identity import entry_digest
from ..defaults import sweep_default
from ..errors import DataError, FedsparseError
from ..sweep.plan import plan_sweep
from ..training.experiment import prepare_dataset


def setup_logging(log_file: str | Path | None) -> None:
    """Log INFO lines with timestamps to ``log_file``, else to stderr.

    A workflow job's lines (a shard's one per run) go to its log only: the console is the
    sweep's progress line (:mod:`fedsparse.pipeline.progress`); a failed job shows its log's tail
    there (:func:`job`).

    Snakemake deletes a job's log before each attempt; every attempt's lines are also
    appended to a hidden ``.<log name>.attempts`` beside it and copied back to the head of
    the new log, so the log Snakemake names tells the whole story of a resumed job.
    """
    handlers: list[logging.Handler] = [] if log_file else [logging.StreamHandler(sys.stderr)]
    attempt = 1
    if log_file:
        log_file = Path(log_file)
        log_file.parent.mkdir(parents=True, exist_ok=True)
        history = _history_of(log_file)
        earlier = history.read_text() if history.is_file() else ""
        attempt += earlier.count(ATTEMPT_MARK)
        if earlier and not log_file.exists():
            log_file.write_text(earlier)
        handlers += [logging.FileHandler(log_file, mode="a"), logging.FileHandler(history)]
    logging.basicConfig(
        level=logging.INFO,
        handlers=handlers,
        force=True,
        format="%(asctime)s %(levelname)s %(message)s",
    )
    if log_file:
        logging.getLogger("fedsparse").info(
            "%s %d on %s, pid %d", ATTEMPT_MARK, attempt, socket.gethostname(), os.getpid()
        )


def _history_of(log_file: Path) -> Path:
    """The hidden file beside a job's log that every attempt's lines are appended to."""
    return log_file.with_name(f".{log_file.name}.attempts")


ATTEMPT_MARK = "---- attempt"
FAILED_TAIL_LINES = 12  # of a failed job's log, shown on the console


@contextlib.contextmanager
def job(log_file: str | Path | None, threads: int | None = None) -> Iterator[None]:
    """A workflow job's frame: its log (see :func:`setup_logging`), its numba threads, and a
    FedsparseError (bad input found only now) as one line in that log and exit status 1
    instead of a traceback; any other error is logged with its traceback, in the log too.
    Either way the log's last lines go to stderr, the console's, beside Snakemake's note of
    the failed job."""
    setup_logging(log_file)
    if threads is not None:
        set_threads(threads)
    failed = False
    try:
        yield
    except FedsparseError as exc:
        logging.getLogger("fedsparse").error("%s", exc)
        failed = True
    except Exception:
        logging.getLogger("fedsparse").exception("the job failed")
        failed = True
    finally:
        _log_from_history(log_file)
    if failed:
        _show_tail(log_file)
        raise SystemExit(1) from None


def _log_from_history(log_file: str | Path | None) -> None:
    """Make the job's log its history (every attempt's lines, :func:`setup_logging`).

    They are the same file's lines unless another Snakemake process started the same job
    meanwhile (two processes on one results folder): its Snakemake deleted the log this one
    was writing, so this job's later lines went to the history only. Whichever job ends last
    leaves the whole story; written atomically, so the other job's open log is not cut.
    """
    if not log_file:
        return
    for handler in logging.getLogger().handlers:
        handler.flush()
    log_file = Path(log_file)
    history = _history_of(log_file)
    try:
        lines, mode = history.read_bytes(), history.stat().st_mode & 0o777
        with atomic_write(log_file) as out:
            os.fchmod(out.fileno(), mode)  # a log's permissions, not a temporary file's
            out.write(lines)
    except OSError:  # the folder removed meanwhile, or a full disk: the job's result stands
        pass


def _show_tail(log_file: str | Path | None) -> None:
    """Print the last lines of a failed job's log to stderr (without a log file, every line
    already went there)."""
    if not log_file:
        return
    for handler in logging.getLogger().handlers:
        handler.flush()
    try:
        lines = Path(log_file).read_text(errors="replace").splitlines()[-FAILED_TAIL_LINES:]
    except OSError:  # the log is gone (a folder removed meanwhile): Snakemake still names it
        return
    rule = "-" * min(80, max(len(line) for line in [str(log_file), *lines]))
    print(f"{log_file} (last lines):", rule, *lines, rule, sep="\n", file=sys.stderr, flush=True)


def set_threads(threads: int) -> None:
    """Use at most ``threads`` numba threads (the job's core allocation)."""
    numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))


def make_data(
    sweep: dict[str, Any], dataset: str, out_dir: str | Path, spec: dict[str, Any] | None = None
) -> None:
    """Generate, download or load a data set of the sweep, partition it, and store it.

    A partitioned data set's folder also holds ``partition_stats.csv`` (rows, labels and
    clusters per client) and ``embedding.csv`` (a 2-D t-SNE of a row sample), which the report
    shows. The folder records the digest of the spec it holds (:mod:`fedsparse.data.identity`)
    and each file's stamp, and is written whole or not at all (an earlier build is left alone
    until then). Built as ``<data>/<name>.<digest>`` (the workflow's name for it), the link
    ``<data>/<name>`` is then pointed at it (:func:`link_latest`).

    Parameters
    ----------
    sweep
        The sweep config (its ``data_cache`` and ``embedding_sample`` are read).
    dataset
        The data set's name in the sweep.
    out_dir
        The folder the data set is stored in.
    spec
        The data set's entry of the sweep's plan (the workflow passes it, so a data job never
        plans the sweep); None: the sweep is planned here.
    """
    if spec is None:
        spec = plan_sweep(sweep).datasets[dataset]
    log = logging.getLogger("fedsparse.data")
    log.info("building data set %s: %s", dataset, spec["data"])
    partition = spec.get("partition", "natural")
    prepared = prepare_dataset(
        spec["data"],
        spec["model"]["loss"],
        partition,
        cache=sweep.get("data_cache"),
        embedding_sample=sweep_default(sweep, "embedding_sample") if partition != "natural" else 0,
    )
    data = prepared.data
    config = {**spec, "source_file": prepared.source} if prepared.source else spec
    tables = {}
    if prepared.partition is not None:
        tables["partition_stats.csv"] = prepared.partition.stats
    if prepared.embedding is not None:
        tables["embedding.csv"] = prepared.embedding
    digest = entry_digest(spec)
    save_dataset(data, out_dir, config=config, digest=digest, tables=tables)
    out_dir = Path(out_dir)
    if out_dir.name == f"{dataset}.{digest}":
        link_latest(out_dir, dataset)
    log.info(
        "data set %s (spec digest %s): %d clients, %d samples (+%d test), %d features -> %s",
        dataset,
        digest,
        data.n_clients,
        data.n_samples,
        data.y_test.shape[0] if data.has_test else 0,
        data.n_features,
        out_dir,
    )


def link_latest(build: Path, dataset: str) -> None:
    """Point ``<data>/<dataset>`` at the data set's ``build`` (a relative link, replaced
    atomically: a copied results folder keeps it). A folder there (built by a fedsparse
    before data digests, or a copy that followed the link) is deleted; its runs stay in the
    store."""
    link = build.parent / dataset
    if link.is_dir() and not link.is_symlink():
        logging.getLogger("fedsparse.data").info(
            "data set %s: replacing the folder %s (not a link: built before data digests, or "
            "copied) by a link to %s",
            dataset,
            link,
            build.name,
        )
        aside = link.with_name(f".{dataset}.old-{os.getpid()}")
        with contextlib.suppress(FileNotFoundError):  # another job's, meanwhile
            os.replace(link, aside)
        shutil.rmtree(aside, ignore_errors=True)
    tmp = link.with_name(f".{dataset}.link-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    os.symlink(build.name, tmp)
    os.replace(tmp, link)


# How long the aggregate waits for an input that vanished while it read (aggregate_shards)
INPUT_PATIENCE_S = 120.0


def aggregate_shards(
    trace_files: list[str | Path],
    run_files: list[str | Path],
    traces_dir: str | Path,
    runs_path: str | Path,
    patience_s: float = INPUT_PATIENCE_S,
    poll_s: float = 0.2,
) -> None:
    """:func:`fedsparse.results.aggregate.aggregate`, started over where an input vanished while it
    read.

    Snakemake deletes a job's outputs before it runs the job, so a second Snakemake process on
    the results folder that reruns a shard may delete an input while this aggregate reads it,
    then write the same file again (a shard file is named by the digest of its runs). A pass cut
    short installs nothing (the outputs are written aside and renamed).

    Parameters
    ----------
    trace_files
        The shards' trace files, in plan order.
    run_files
        The shards' runs files, in plan order.
    traces_dir
        The traces dataset written.
    runs_path
        The runs table written.
    patience_s
        Seconds to wait, in all, for vanished inputs to be back before giving up.
    poll_s
        Seconds between checks for a vanished input.

    Raises
    ------
    DataError
        An input still missing after ``patience_s``, named; or as :func:`aggregate` raises.
    FileNotFoundError
        A missing file that is none of the inputs.
    """
    from ..results.aggregate import aggregate  # pyarrow.dataset: not in every job's start (0.6 s)

    inputs = [Path(p) for p in (*run_files, *trace_files)]
    log = logging.getLogger("fedsparse.results.aggregate")
    deadline = time.monotonic() + patience_s
    while True:
        try:
            aggregate(trace_files, run_files, traces_dir, runs_path)
            return
        except FileNotFoundError as exc:
            missing = [p for p in inputs if not p.exists()]
            if not missing and not any(str(p) in str(exc) for p in inputs):
                raise  # not an input of ours
            if missing:
                log.info(
                    "%s is gone (another Snakemake process on this results folder reruns its "
                    "job?); waiting up to %.0f s for it to be written again",
                    missing[0],
                    max(0.0, deadline - time.monotonic()),
                )
            while missing and time.monotonic() < deadline:
                time.sleep(poll_s)
                missing = [p for p in missing if not p.exists()]
            if missing or time.monotonic() >= deadline:
                gone = missing[0] if missing else exc
                raise DataError(
                    f"{gone}: an input of the aggregate, gone while it read it and not written "
                    f"again within {patience_s:g} s (another Snakemake process on this results "
                    "folder reran its job and did not finish it?); run snakemake again"
                ) from None
            log.info("every input is back; aggregating again")
