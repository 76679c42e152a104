"""A sweep's stored traces, for comparing runs computed in cohorts with the same runs alone
(a helper module of the cohort tests, not a test module)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from fedsparse.pipeline.shard_runner import run_shard
from fedsparse.pipeline.steps import make_data
from fedsparse.results.run_store import store_path
from fedsparse.sweep import plan_sweep


def without_elapsed(table: pa.Table) -> pa.Table:
    return table.drop_columns(["elapsed_s"]).replace_schema_metadata(None)


def stored_traces(sweep: dict, root) -> dict[str, pa.Table]:
    plan = plan_sweep(sweep)
    make_data(sweep, "toy", root / "data" / "toy")
    for shard in plan.shards:
        out = root / "shards"
        run_shard(
            sweep, shard, root / "data", out / f"{shard}.t.parquet", out / f"{shard}.r.parquet"
        )
    return {
        r.run_id: without_elapsed(pq.read_table(store_path(root / "store", r.run_id)))
        for r in plan.runs
    }
