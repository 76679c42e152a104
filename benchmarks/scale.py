"""How fedsparse's own stages grow with a sweep's size: wall time and peak memory per stage.

    python benchmarks/scale.py                  # 10^4 and 10^5 runs (minutes)
    python benchmarks/scale.py --sizes 1e4,1e5,1e6

For each size N (runs x 200 rounds, the default sweep's simulations with more seeds, step
sizes and local-step counts), each stage runs in a process of its own, timed from outside
(wall time, CPU time and peak resident memory from the kernel's accounting of the child):

  plan       plan and check the sweep (what the main Snakemake process does first)
  dag        snakemake -n: plan, check, and the job graph
  job        a cluster job's own Snakemake (--mode remote -n for one shard), which reads the
             plan file, and the shard reading its runs
  aggregate  N synthesised runs x 201 evaluated rounds (values of a real trace) in shard
             files -> traces/ and runs.parquet
  query      fedsparse query: a group-by over every trace row
  merge      fedsparse merge of those results into another folder (up to --merge-max runs)
  report     fedsparse report of those results (skipped above --report-max runs)

Results (aggregate, query, merge, report) are synthesised up to --results-max runs: 10^6 runs
are 2 x 10^8 trace rows, an hour of synthesis on a 2-core machine before anything is measured.
Above it, --sample-every K synthesises every K-th shard of the plan (shards of the size they
have at N) and aggregates their trace files K times over ("aggregate-replay": the traces of N
runs, each shard's K times; the runs table is the sample's), then queries those traces:

    python benchmarks/scale.py --sizes 1e6 --results-max 0 --sample-every 24   # ~15 minutes

Merging many large folders (``fedsparse merge`` itself is then measured from outside, e.g. with
``/usr/bin/time -v``): --replicate RESULTS writes --folders folders of --copies copies each of
the results folder RESULTS (run ids suffixed with the copy's number; folder f holds copies
f x (copies - overlap) onwards, so neighbouring folders share --overlap copies' runs):

    python benchmarks/scale.py --replicate results/quick --folders 10 --copies 100 \\
        --overlap 10 -o /tmp/merge-bench      # 10 x 12,000 runs, 3.25 M trace rows
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _usage(usage) -> dict[str, float]:
    return {"cpu_s": usage.ru_utime + usage.ru_stime, "peak_mb": usage.ru_maxrss / 1024}


def run_measured(args: list[str], cwd: Path | None = None) -> dict[str, float]:
    """Wall seconds, CPU seconds and peak resident MB of one child process (its own
    accounting, read with wait4)."""
    t = time.perf_counter()
    proc = subprocess.Popen(args, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(map(str, args[:8]))} failed:\n{err.decode()[-2000:]}")
    return {"wall_s": time.perf_counter() - t, **_usage(usage)}


def sweep_of(n: int) -> dict:
    """The default sweep's data sets and algorithms with its grid widened to ~n runs."""
    from fedsparse.sweep import plan_sweep

    cfg = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    cfg["grid"]["local_steps"] = list(range(1, 11))
    cfg["grid"]["sparsity"] = [100 + 10 * i for i in range(10)]
    configs = len(plan_sweep({**cfg, "seeds": [0]}).runs)
    cfg["seeds"] = list(range(max(1, round(n / configs))))
    cfg["progress_every"] = 0
    return cfg


def synthesise_results(cfg: dict, folder: Path, every: int = 1) -> tuple[int, int]:
    """Shard files of the sweep's runs (of every ``every``-th shard), every trace a real
    200-round trace's values with the objective scaled per run; then aggregated by
    ``fedsparse``'s own step (measured by the caller). Returns (runs, trace rows) written."""
    import fedsparse
    from fedsparse.results.schema import RUNS_SCHEMA, TRACE_SCHEMA, write_parquet_atomic
    from fedsparse.sweep import plan_sweep

    base = fedsparse.run(
        {
            "dataset": {"kind": "synthetic", "clients": 10, "samples_per_client": 20, "dim": 300},
            "algorithm": "fedht",
            "params": {"stepsize": 0.001, "sparsity": 200},
            "rounds": 200,
        }
    )
    base = pa.Table.from_pandas(base, schema=TRACE_SCHEMA, preserve_index=False)
    plan = plan_sweep(cfg)
    rng = np.random.default_rng(0)
    shards = folder / "shards"
    files = []
    rows = n_runs = 0
    for name in list(plan.shards)[::every]:
        runs = plan.shards[name]
        n_runs += len(runs)
        n, r = len(runs), base.num_rows
        take = pa.array(np.tile(np.arange(r), n))
        table = base.take(take)
        scale = np.repeat(1 + rng.random(n), r)
        cols = {
            "run_id": pa.array(np.repeat([x.run_id for x in runs], r)),
            "dataset": pa.array(np.repeat([x.dataset for x in runs], r)),
            "algorithm": pa.array(np.repeat([x.config["algorithm"] for x in runs], r)),
            "seed": pa.array(np.repeat([x.config["seed"] for x in runs], r)),
            "objective": pa.array(table.column("objective").to_numpy() * scale),
        }
        for col, values in cols.items():
            i = table.schema.get_field_index(col)
            table = table.set_column(i, col, values.cast(TRACE_SCHEMA.field(col).type))
        last = table.column("objective").to_numpy()[r - 1 :: r]
        summary = pa.table(
            {
                "run_id": [x.run_id for x in runs],
                "sweep": [cfg["sweep"]] * n,
                "dataset": [x.dataset for x in runs],
                "algorithm": [x.config["algorithm"] for x in runs],
                "seed": [x.config["seed"] for x in runs],
                "stepsize": [x.config["params"].get("stepsize") for x in runs],
                "local_steps": [x.config["params"].get("local_steps") for x in runs],
                "sparsity": [x.config["params"].get("sparsity") for x in runs],
                "status": ["ok"] * n,
                "final_objective": last,
                "best_objective": last,
                "final_round": [200] * n,
            }
        )
        full = pa.table(
            {
                f.name: summary.column(f.name).cast(f.type)
                if f.name in summary.column_names
                else pa.nulls(n, f.type)
                for f in RUNS_SCHEMA
            },
            schema=RUNS_SCHEMA,
        )
        write_parquet_atomic(table, shards / f"{name}.parquet")
        write_parquet_atomic(full, shards / f"{name}.runs.parquet")
        files.append(name)
        rows += table.num_rows
    (folder / "shards.json").write_text(json.dumps(files))
    return n_runs, rows


def replicate_results(
    source: Path, dest: Path, folders: int, copies: int, overlap: int = 0
) -> tuple[int, int]:
    """``folders`` results folders dest/r000, ... each of ``copies`` copies of the results
    folder ``source`` (run ids suffixed -<copy>); folder f holds copies f * (copies - overlap)
    onwards. Written by fedsparse's own aggregate writer; returns (runs, trace rows) written."""
    import pyarrow.compute as pc

    from fedsparse.layout import Layout
    from fedsparse.query.read import read_results
    from fedsparse.results.aggregate import write_traces_dataset
    from fedsparse.results.schema import RUNS_SCHEMA, TRACE_SCHEMA, write_parquet_atomic

    runs = read_results([source], "SELECT * FROM runs ORDER BY run_id").cast(RUNS_SCHEMA)
    traces = read_results(
        [source], "SELECT * FROM traces ORDER BY dataset, algorithm, run_id, round"
    ).cast(TRACE_SCHEMA)

    def suffixed(table: pa.Table, copy: int) -> pa.Table:
        ids = pc.binary_join_element_wise(table.column("run_id"), f"{copy:06d}", "-")
        return table.set_column(0, "run_id", ids)

    n_runs = n_rows = 0
    for f in range(folders):
        first = f * (copies - overlap)
        out = Layout(dest / f"r{f:03d}")
        out.root.mkdir(parents=True, exist_ok=True)
        kept = range(first, first + copies)
        write_parquet_atomic(pa.concat_tables(suffixed(runs, c) for c in kept), out.runs)
        # a copy's rows after the previous copy's: each partition stays in run order
        write_traces_dataset(
            (b for c in kept for b in suffixed(traces, c).to_batches()), out.traces
        )
        n_runs += copies * runs.num_rows
        n_rows += copies * traces.num_rows
    return n_runs, n_rows


AGGREGATE = """
import json, sys
from pathlib import Path
from fedsparse.results import aggregate as a
folder, every = Path(sys.argv[1]), int(sys.argv[2])
names = json.loads((folder / "shards.json").read_text())
traces = [folder / f"shards/{n}.parquet" for n in names]
runs = [folder / f"shards/{n}.runs.parquet" for n in names]
out = folder / "results"
if every == 1:
    a.aggregate(traces, runs, out / "traces", out / "runs.parquet")
else:  # the aggregate rule's steps, the trace files K times over (their runs would be refused)
    staged_runs = a._write_runs(runs, out / "runs.parquet")
    staged = a.stage_traces(a._sorted_traces(traces * every), out / "traces")
    a.install(staged, out / "traces", staged_runs, out / "runs.parquet")
"""
PLAN = """
import sys, yaml
from fedsparse.layout import Layout
from fedsparse.sweep.plan_file import write_plan_file
from fedsparse.sweep import plan_checked
cfg = yaml.safe_load(open(sys.argv[1]))
plan = plan_checked(cfg)
if len(sys.argv) > 2:
    write_plan_file(plan, cfg, Layout(sys.argv[2]).plan_file)
"""
SYNTHESISE = """
import sys, yaml
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from scale import synthesise_results
folder = Path(sys.argv[2])
cfg = yaml.safe_load((folder / "sweep.yaml").read_text())
print(synthesise_results(cfg, folder, int(sys.argv[3]))[1])
"""
COUNT = """
import json, sys, yaml
from fedsparse.sweep import plan_sweep
plan = plan_sweep(yaml.safe_load(open(sys.argv[1])))
names = list(plan.shards)
name = names[len(names) // 2]
print(json.dumps([len(plan.runs), len(names), name, plan.shard_digest(name)]))
"""
READ_SHARD = """
import sys, yaml
import fedsparse.pipeline.shard_runner
from fedsparse.sweep.plan_file import read_plan_shard
cfg = yaml.safe_load(open(sys.argv[1]))
read_plan_shard(sys.argv[2], sys.argv[3], cfg)
"""


def bench(
    sizes: list[int],
    report_max: int,
    results_max: int,
    merge_max: int = int(1e5),
    sample_every: int = 0,
) -> list[dict]:
    rows = []
    snakemake = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile")]
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            cfg = {**sweep_of(n), "results": "results"}  # the folder the stages below read
            (tmp / "sweep.yaml").write_text(yaml.safe_dump(cfg))
            # counted in a child: a large plan in this process would be counted again in
            # every child's peak memory (a forked child starts with its parent's pages)
            count = subprocess.run(
                [sys.executable, "-c", COUNT, str(tmp / "sweep.yaml")],
                capture_output=True,
                text=True,
                check=True,
            )
            runs, n_shards, shard, digest = json.loads(count.stdout)
            print(f"{runs:,} runs in {n_shards} shards", flush=True)

            def row(stage: str, m: dict, runs: int = runs) -> None:
                rows.append({"runs": runs, "stage": stage, **m})
                print(
                    f"  {stage:<10} wall {m['wall_s']:7.1f} s  cpu {m['cpu_s']:7.1f} s  "
                    f"peak {m['peak_mb']:7.0f} MB",
                    flush=True,
                )

            py = [sys.executable, "-c"]
            row("plan", run_measured([*py, PLAN, str(tmp / "sweep.yaml")]))
            config = ["--configfile", str(tmp / "sweep.yaml")]
            row("dag", run_measured([*snakemake, *config, "-n", "--quiet"], cwd=tmp))
            run_measured([*py, PLAN, str(tmp / "sweep.yaml"), str(tmp / "results")])
            job = f"run_shard:shard={shard},digest={digest}"
            target = ["--mode", "remote", "-n", "--target-jobs", job]
            row("job", run_measured([*snakemake, *config, *target, "--quiet"], cwd=tmp))
            plan_file = str(tmp / "results/shards/plan.parquet")
            row(
                "job-runs",
                run_measured([*py, READ_SHARD, str(tmp / "sweep.yaml"), plan_file, shard]),
            )
            every = 1 if runs <= results_max else sample_every
            if every < 1:  # the planning stages only
                continue
            t = time.perf_counter()
            synth = subprocess.run(  # in a child, for the same reason as COUNT
                [
                    sys.executable,
                    "-c",
                    SYNTHESISE,
                    str(Path(__file__).parent),
                    str(tmp),
                    str(every),
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            trace_rows = int(synth.stdout)
            print(
                f"  ({trace_rows:,} trace rows synthesised in {time.perf_counter() - t:.0f} s"
                + (f", every {every}th shard, aggregated {every} times over)" if every > 1 else ")")
            )
            stage = "aggregate" if every == 1 else "aggregate-replay"
            row(stage, run_measured([*py, AGGREGATE, str(tmp), str(every)]))
            sql = "SELECT algorithm, count(*) AS n, avg(objective) FROM traces GROUP BY algorithm"
            fedsparse = [sys.executable, "-m", "fedsparse.cli"]
            row("query", run_measured([*fedsparse, "query", sql, str(tmp / "results")]))
            if every > 1:  # a replayed run's traces are there K times: no merge or report
                continue
            if runs <= merge_max:
                merged = [*fedsparse, "merge", str(tmp / "results"), "-o", str(tmp / "merged")]
                row("merge", run_measured(merged))
            if runs <= report_max:
                report = [*fedsparse, "report", str(tmp / "results")]
                row("report", run_measured(report))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1e4,1e5", help="run counts, comma-separated")
    parser.add_argument("--report-max", type=float, default=1e5, help="largest size reported")
    parser.add_argument(
        "--results-max", type=float, default=2e5, help="largest size whose results are synthesised"
    )
    parser.add_argument(
        "--merge-max", type=float, default=1e5, help="largest size merged (fedsparse merge)"
    )
    parser.add_argument(
        "--sample-every",
        type=int,
        default=0,
        metavar="K",
        help="above --results-max: synthesise every K-th shard, aggregate it K times over",
    )
    parser.add_argument("-o", "--output", type=Path, help="write the rows as JSON here")
    parser.add_argument(
        "--replicate", type=Path, metavar="RESULTS", help="write copies of RESULTS to -o (merge)"
    )
    parser.add_argument("--folders", type=int, default=10, help="with --replicate")
    parser.add_argument("--copies", type=int, default=100, help="with --replicate")
    parser.add_argument("--overlap", type=int, default=0, help="with --replicate")
    args = parser.parse_args()
    if args.replicate:
        if args.output is None:
            parser.error("--replicate needs -o FOLDER")
        made = replicate_results(
            args.replicate, args.output, args.folders, args.copies, args.overlap
        )
        print(f"{made[0]:,} runs, {made[1]:,} trace rows in {args.folders} folders")
        return
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    rows = bench(
        sizes, int(args.report_max), int(args.results_max), int(args.merge_max), args.sample_every
    )
    if args.output:
        args.output.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
