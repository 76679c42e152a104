"""scripts/compare-results, the before/after check of changes that must keep every output: it
passes two runs of the same sweep and fails on a one-ulp change of one trace value."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from conftest import SMALL_LINEAR, run_sweep

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "compare-results"
SWEEP = {
    "sweep": "cmp",
    "rounds": 4,
    "seeds": [0, 1],
    "datasets": {"lin": {"data": dict(SMALL_LINEAR)}},
    "algorithms": {"fedht": {}},
    "grid": {"stepsize": [0.01, 0.001], "sparsity": [10], "local_steps": [2], "batch_size": [5]},
}


def compare(a: Path, b: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, SCRIPT, a, b], capture_output=True, text=True)


def test_two_runs_of_a_sweep_compare_identical_and_one_ulp_does_not(tmp_path):
    from fedsparse.report import build_report

    a = run_sweep(tmp_path / "a", SWEEP)
    b = run_sweep(tmp_path / "b", SWEEP)  # computed again: timings differ, values do not
    build_report(a)
    build_report(b)
    same = compare(a, b)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "IDENTICAL" in same.stdout

    (part,) = sorted((b / "traces").rglob("*.parquet"))[:1]
    table = pq.read_table(part)
    objective = table.column("objective").to_numpy().copy()
    objective[-1] = np.nextafter(objective[-1], np.inf)  # one ulp
    i = table.schema.get_field_index("objective")
    table = table.set_column(i, table.schema.field(i), pa.array(objective))
    pq.write_table(table, part)
    differ = compare(a, b)
    assert differ.returncode == 1 and "DIFFERENT" in differ.stdout

    shutil.rmtree(b)
    missing = compare(a, b)
    assert missing.returncode != 0
