"""How long planning a large grid takes: the plan alone, by phase, and ``snakemake -n``.

    python benchmarks/plan.py                       # 945,000 runs (about a minute a repeat)
    python benchmarks/plan.py --seeds 5 --repeat 3  # 94,500 runs, each figure the best of 3

The grid is the default sweep's (config/config.yaml) data sets and algorithms x ``--steps`` step
sizes x ``--local-steps`` local-step counts x ``--sparsity`` sparsity levels x ``--seeds`` seeds
(Distributed-IHT keeps its one local step). Every figure is measured in a process of its own,
this checkout's fedsparse (src/) on its path; wall and CPU seconds (and the peak resident
memory of each process):

  plan         plan_checked (what the workflow's main Snakemake process does first), by phase:
               plan_sweep, check_plan, and the plan file the workflow writes before its first
               job (write_plan_file; not in a dry run); the process's own total includes
               Python's start and the imports
  snakemake -n the workflow's dry run: plan, check, the job graph
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

import yaml

ROOT = Path(__file__).resolve().parents[1]

PHASES = """
import json, sys, tempfile, time
t0 = time.perf_counter(), time.process_time()
import yaml
import fedsparse.sweep.checks
from fedsparse.layout import Layout
from fedsparse.sweep.plan_file import write_plan_file
from fedsparse.sweep import plan_checked
cfg = yaml.safe_load(open(sys.argv[1]))
marks = [("start", t0)]
def mark(name):
    marks.append((name, (time.perf_counter(), time.process_time())))
mark("imports")
check_plan = fedsparse.sweep.checks.check_plan
def timed_check_plan(plan, sweep):  # plan_checked's second phase: its end is plan_sweep's
    mark("plan_sweep")
    check_plan(plan, sweep)
fedsparse.sweep.checks.check_plan = timed_check_plan
plan = plan_checked(cfg)
mark("check_plan")
with tempfile.TemporaryDirectory() as tmp:
    write_plan_file(plan, cfg, Layout(tmp).plan_file)
    mark("write_plan_file")
phases = {
    name: {"wall_s": b[0] - a[0], "cpu_s": b[1] - a[1]}
    for (_, a), (name, b) in zip(marks, marks[1:])
}
print(json.dumps({"runs": len(plan.runs), "shards": len(plan.shards), "phases": phases}))
"""


def sweep(seeds: int, steps: int, local_steps: int, sparsity: int) -> dict:
    """The default sweep's data sets and algorithms over the widened grid."""
    cfg = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    stepsizes = cfg["grid"]["stepsize"][:steps]
    while len(stepsizes) < steps:  # more than the default sweep's: halving below its least
        stepsizes.append(min(stepsizes) / 2)
    cfg["grid"]["stepsize"] = stepsizes
    cfg["grid"]["local_steps"] = list(range(1, local_steps + 1))
    cfg["grid"]["sparsity"] = [100 + 10 * i for i in range(sparsity)]
    cfg["seeds"] = list(range(seeds))
    cfg["progress_every"] = 0
    cfg["results"] = "results"
    return cfg


def _env() -> dict[str, str]:
    """This checkout's fedsparse first on the children's path."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": str(ROOT / "src") + (f":{path}" if path else "")}


def run_measured(args: list[str], cwd: Path | None = None) -> tuple[dict[str, float], str]:
    """Wall and CPU seconds of one child process (its own accounting, read with wait4, as
    benchmarks/scale.py does), and what it printed."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t = time.perf_counter()
        proc = subprocess.Popen(args, cwd=cwd, env=_env(), stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        if proc.returncode:
            raise RuntimeError(f"{' '.join(map(str, args[:8]))} failed:\n{err.read()[-2000:]}")
        cpu = usage.ru_utime + usage.ru_stime
        return {"wall_s": wall, "cpu_s": cpu, "peak_mb": usage.ru_maxrss / 1024}, out.read()


def _line(label: str, m: dict[str, float]) -> str:
    peak = f"  peak {m['peak_mb']:6.0f} MB" if "peak_mb" in m else ""
    return f"  {label:<22} wall {m['wall_s']:7.2f} s  cpu {m['cpu_s']:7.2f} s{peak}"


def _best(rows: list[dict[str, float]]) -> dict[str, float]:
    return {k: min(r[k] for r in rows) for k in rows[0]}


def bench(cfg: dict, repeat: int, dry_run: bool) -> dict:
    out: dict = {"plan": [], "snakemake -n": []}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        config = tmp / "sweep.yaml"
        config.write_text(yaml.safe_dump(cfg))
        for i in range(repeat):
            process, text = run_measured([sys.executable, "-c", PHASES, str(config)])
            measured = json.loads(text)
            if i == 0:
                print(f"{measured['runs']:,} runs in {measured['shards']:,} shards", flush=True)
            out["runs"], out["shards"] = measured["runs"], measured["shards"]
            phases = measured["phases"]
            phases["plan_checked"] = {
                k: phases["plan_sweep"][k] + phases["check_plan"][k] for k in ("wall_s", "cpu_s")
            }
            phases["process"] = process
            out["plan"].append(phases)
            print(f"run {i + 1} of {repeat}:", flush=True)
            for name, m in phases.items():
                print(_line(name, m), flush=True)
            if dry_run:
                snakemake = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile")]
                args = [*snakemake, "--configfile", str(config), "-n", "--quiet"]
                folder = tmp / f"dry-run-{i}"
                folder.mkdir()
                m, _ = run_measured(args, cwd=folder)
                out["snakemake -n"].append(m)
                print(_line("snakemake -n", m), flush=True)
    if repeat > 1:
        print(f"best of {repeat}:")
        for name in out["plan"][0]:
            best = _best([p[name] for p in out["plan"]])
            print(_line(name, best))
        if dry_run:
            best = _best(out["snakemake -n"])
            print(_line("snakemake -n", best))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=50, help="seeds 0..N-1")
    parser.add_argument("--steps", type=int, default=15, help="step sizes")
    parser.add_argument("--local-steps", type=int, default=10, help="local-step counts 1..N")
    parser.add_argument("--sparsity", type=int, default=10, help="sparsity levels 100, 110, ...")
    parser.add_argument("--repeat", type=int, default=1, help="measure each N times, print best")
    parser.add_argument("--no-dry-run", action="store_true", help="the plan alone")
    parser.add_argument("-o", "--output", type=Path, help="write the measurements as JSON here")
    args = parser.parse_args()
    cfg = sweep(args.seeds, args.steps, args.local_steps, args.sparsity)
    measured = bench(cfg, args.repeat, not args.no_dry_run)
    if args.output:
        args.output.write_text(json.dumps(measured, indent=1))


if __name__ == "__main__":
    main()
