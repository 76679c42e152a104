"""The workflow's steps as plain functions (the Snakemake scripts only call these)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import numba

from .data import save_dataset
from .experiment import load_dataset
from .sweep import plan_sweep


def setup_logging(log_file: str | Path | None) -> None:
    """Log INFO lines with timestamps to ``log_file`` (and stderr)."""
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file:
        Path(log_file).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_file, mode="a"))
    logging.basicConfig(
        level=logging.INFO,
        handlers=handlers,
        force=True,
        format="%(asctime)s %(levelname)s %(message)s",
    )


def set_threads(threads: int) -> None:
    """Use at most ``threads`` numba threads (the job's core allocation)."""
    numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))


def make_data(sweep: dict[str, Any], dataset: str, out_dir: str | Path) -> None:
    """Generate or load data set ``dataset`` of the sweep and store it for its runs."""
    spec = plan_sweep(sweep).datasets[dataset]
    log = logging.getLogger("fedsparse.data")
    log.info("building data set %s: %s", dataset, spec["data"])
    data = load_dataset(spec["data"], spec["model"]["loss"])
    save_dataset(data, out_dir, config=spec)
    log.info(
        "data set %s: %d clients, %d samples, %d features -> %s",
        dataset,
        data.n_clients,
        data.n_samples,
        data.n_features,
        out_dir,
    )
