"""The ``fedsparse`` command."""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
import warnings
from pathlib import Path

from . import __version__
from .defaults import RESULTS_ROOT
from .errors import FedsparseError, FedsparseWarning, MissingResultsError
from .layout import Layout
from .wording import counted


def _cmd_run(args: argparse.Namespace) -> int:
    from .results.schema import write_parquet_atomic
    from .training.config import normalize_run_config, read_config_file
    from .training.experiment import run_trace

    cfg = normalize_run_config(read_config_file(args.config))
    table = run_trace(cfg)
    write_parquet_atomic(table, args.output)
    last = table.slice(table.num_rows - 1).to_pylist()[0]
    print(
        f"{cfg['algorithm']} on {last['dataset']}: round {last['round']}, "
        f"objective {last['objective']:.6g}, status {last['status']} -> {args.output}"
    )
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    from .sweep.plan import plan_checked
    from .training.config import normalize_run_config, read_config_file

    merged: dict = {}
    for path in args.configs:  # later files override earlier ones, as snakemake merges them
        _merge(merged, read_config_file(path))
    names = ", ".join(str(p) for p in args.configs)
    if "datasets" not in merged:  # a run config (fedsparse run)
        cfg = normalize_run_config(merged)
        return _check_run(cfg, names, args)
    try:
        plan = plan_checked(merged)
    except FedsparseError as exc:
        raise type(exc)(f"{names}: {exc}") from None
    from .layout import Layout
    from .sweep.machine import host_rates
    from .sweep.sweep_cost import describe, sweep_cost

    # data sets built already (in the sweep's results folder) are sized from their folders
    cost = sweep_cost(plan, host_rates(), Layout.of_sweep(merged).root)
    if args.json:
        out = {"configs": [str(p) for p in args.configs], "valid": True}
        out.update(cost.as_json(args.nodes, args.node_cores))
        print(json.dumps(out, indent=1))
        return 0
    if plan.studies:
        studies = counted(len(plan.studies), "Optuna study", "Optuna studies")
        print(f"{names}: a valid sweep: {studies}")
    else:
        print(
            f"{names}: a valid sweep: {counted(len(plan.runs), 'run')} in "
            f"{counted(len(plan.shards), 'shard')} over {counted(len(plan.datasets), 'data set')}"
        )
    for line in describe(cost, args.nodes, args.node_cores):
        print(line)
    if args.digests:
        for line in _digest_lines(plan, merged):
            print(line)
    return 0


def _check_run(cfg: dict, names: str, args: argparse.Namespace) -> int:
    """``fedsparse check`` of a run config: valid, and its estimated cost where its data's
    shape is known from the config."""
    from .sweep.cost import run_seconds, spec_shape
    from .sweep.machine import host_rates

    shape = spec_shape(cfg["dataset"], cfg.get("partition", "natural"))
    seconds = None if shape is None else run_seconds(cfg, shape, rates=host_rates())
    if args.json:
        out = {"configs": [str(p) for p in args.configs], "valid": True, "runs": 1}
        out["core_seconds"] = None if seconds is None else round(seconds, 1)
        print(json.dumps(out, indent=1))
        return 0
    rounds = counted(cfg["rounds"], "round")
    print(f"{names}: a valid run config ({cfg['algorithm']}, {rounds})")
    if seconds is not None:
        from .sweep.sweep_cost import duration

        print(f"estimated cost: {duration(seconds)} of one core (its data aside)")
    return 0


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return value


def _digest_lines(plan, sweep: dict) -> list[str]:
    """What names each input of the sweep (docs/sweeps.md, "What decides that a step
    reruns") and whether its results folder holds it: a missing one is built or run."""
    from .layout import Layout

    L = Layout.of_sweep(sweep)

    def state(path: Path) -> str:
        return f"present: {path}" if path.exists() else f"missing (snakemake makes it): {path}"

    lines = [
        f"data set {name}: spec digest {plan.data_digest(name)}, "
        + state(L.dataset_build(name, plan.data_digest(name)))
        for name in plan.datasets
    ]
    done = sum(L.shard_runs(s, plan.shard_digest(s)).is_file() for s in plan.shards)
    if plan.shards:
        lines.append(f"shards: {done} of {len(plan.shards)} present in {L.shards}")
    lines += [
        f"study {name}: settings digest {spec.digest}, " + state(L.study_marker(name, spec.digest))
        for name, spec in plan.studies.items()
    ]
    return lines


def _merge(into: dict, update: dict) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def _cmd_report(args: argparse.Namespace) -> int:
    from .report import build_report

    html = build_report(_results_read(args), args.output)
    print(f"report -> {html}")
    return 0


def _cmd_query(args: argparse.Namespace) -> int:
    from .query import open_results, output_format, run_query, write_rows

    fmt = output_format(args.format, args.output)
    with open_results(_results_read(args)) as results:
        rows = write_rows(run_query(results, args.sql), fmt, args.output, args.limit)
    if args.output is not None:
        print(f"{counted(rows, 'row')} -> {args.output}")
    return 0


def _cmd_best(args: argparse.Namespace) -> int:
    from .query import (
        best_configurations,
        best_view,
        open_results,
        output_format,
        pareto_configurations,
        pareto_view,
        write_rows,
    )

    fmt = output_format(args.format, args.output)
    by = [c for item in args.by for c in item.split(",") if c]
    with open_results(_results_read(args)) as results:
        if fmt == "table" and not args.all_columns:
            if args.pareto:
                view = pareto_view(results, args.metric, args.pareto, by)
            else:
                view = best_view(results, args.metric, by)
            write_rows(view.table.to_reader(), fmt, None, args.limit)
            for note in view.notes:  # wrapped: the table is narrow now, so are its notes
                print(textwrap.fill(note, 100, subsequent_indent="  ", break_on_hyphens=False))
            return 0
        if args.pareto:
            reader = pareto_configurations(results, args.metric, args.pareto, by).to_reader()
        else:
            reader = best_configurations(results, args.metric, by)
        rows = write_rows(reader, fmt, args.output, args.limit)
    if args.output is not None:
        print(f"{counted(rows, 'row')} -> {args.output}")
    return 0


def _cmd_merge(args: argparse.Namespace) -> int:
    from .query import merge_results

    m = merge_results(args.sources, args.output)
    folders = list(dict.fromkeys(args.sources))  # a folder given twice is read once
    found = ", ".join(f"{n} in {src}" for n, src in zip(m.per_folder, folders, strict=False))
    print(f"merged {counted(m.runs, 'run')} ({found}) -> {args.output}")
    return 0


def _output_options(p: argparse.ArgumentParser) -> None:
    from .query import DEFAULT_LIMIT, FORMATS

    p.add_argument(
        "--format",
        default=None,
        metavar="|".join(FORMATS),
        help="table (default; prints at most --limit rows), csv (stdout or -o) or parquet (-o); "
        "default with -o: from its suffix",
    )
    p.add_argument("-o", "--output", type=Path, default=None, help="write the rows to this file")
    p.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_LIMIT,
        help=f"rows a table shows (default {DEFAULT_LIMIT}; 0: all)",
    )


def _results_folders(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "results",
        type=Path,
        nargs="*",
        help=f"results folders holding runs.parquet and traces/ (default: the one in "
        f"{RESULTS_ROOT}/, a sweep's {RESULTS_ROOT}/<sweep>); several are read as one, each run "
        "once (see fedsparse merge)",
    )


def _results_read(args: argparse.Namespace) -> list[Path]:
    """The results folders a reading command reads: those named, else the one results
    folder in ``results/`` (a sweep's ``results/<sweep>``, or ``results`` itself from an
    older version). A folder holding results folders instead of being one, or a default
    that finds none or several, is an error of one line naming what to name instead."""
    example = f"fedsparse {args.command}{' SQL' if args.command == 'query' else ''}"
    for folder in args.results:
        inside = Layout.found_in(folder)
        if not Layout(folder).runs.exists() and inside:
            names = ", ".join(str(f.root) for f in inside)
            raise MissingResultsError(
                f"{folder}: a folder of results folders ({names}), not one itself; name one, "
                f"e.g. {example} {inside[0].root}"
            )
    if args.results:
        return args.results
    found = Layout.found_in(RESULTS_ROOT)
    if len(found) == 1:
        return [found[0].root]
    if not found:
        raise MissingResultsError(
            f"no results folder in {RESULTS_ROOT}/ (a sweep writes {RESULTS_ROOT}/<sweep>/): "
            f"run one, or name its folder ({example} DIR)"
        )
    names = ", ".join(str(f.root) for f in found)
    raise MissingResultsError(
        f"{RESULTS_ROOT}/ holds several sweeps' results: {names}; name the one to read "
        f"(e.g. {example} {found[-1].root}) or several"
    )


def _cmd_tune(args: argparse.Namespace) -> int:
    import json

    from .pipeline.steps import setup_logging
    from .training.config import read_config_file
    from .tune.export import study_status
    from .tune.storage import create_study
    from .tune.worker import run_worker

    sweep = read_config_file(args.sweep)
    layout = Layout(args.results) if args.results else Layout.of_sweep(sweep)
    if args.action == "status":
        for row in study_status(sweep, layout.root):
            print(json.dumps(row, default=str))
        return 0
    if not args.study:
        raise FedsparseError(f"tune {args.action}: --study is required")
    setup_logging(None)
    if args.action == "create":
        create_study(sweep, args.study, layout.root)
    else:  # an extra worker, e.g. on another machine sharing a PostgreSQL study
        run_worker(sweep, args.study, layout.data, layout.root)
    return 0


def _cmd_ledger(args) -> int:
    from .report import ledger
    from .report.build import families

    found = {ledger.family_folder(f): f for f in families()}
    names = args.family if isinstance(args.family, list) else [args.family]
    if args.action == "rebuild" and not names:  # every family that has a ledger
        names = [n for n in found if (args.out / n / ledger.RUNS_FILE).is_file()]
    for name in names:
        if name not in found:
            raise FedsparseError(
                f"ledger {args.action}: {name} is not a family; one of {', '.join(sorted(found))}"
            )
    if args.action == "record":
        for folder in args.results:
            if not Layout(folder).runs.is_file():
                raise FedsparseError(
                    f"ledger record: {folder} is not a results folder (no runs.parquet)"
                )
        print(ledger.record(args.results, found[names[0]], args.config, args.out))
        return 0
    if args.action == "rerun":
        import subprocess

        family = found[names[0]]
        given = [a for a in args.snakemake_args if a != "--"] or ["--cores", "all"]
        runs = ledger.rerun_commands(family, args.results_root, args.out, given)
        for command, _ in runs:
            print("+", " ".join(command), flush=True)
            if (code := subprocess.run(command).returncode) != 0:
                raise FedsparseError(f"ledger rerun: `{' '.join(command)}` exited {code}")
        configs = [config for _, (config, _) in runs]
        print(ledger.record([folder for _, (_, folder) in runs], family, configs, args.out))
        return 0
    stale = []
    for name in names:
        pages = args.output / name if args.output else None
        if not ledger.rebuild(found[name], args.out, pages, check=args.check):
            stale.append(name)
        verb = "differs from" if args.check else "rewritten from"
        state = f"claims.csv {verb} its runs" if name in stale else "claims.csv as its runs give"
        print(f"{args.out / name}: {state}" + (f"; pages in {pages}" if pages else ""))
    return 1 if (args.check and stale) else 0


def _cmd_docs_verdicts(args) -> int:
    from .report.ledger import sync_files

    root = args.root
    paths = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    stale = sync_files([p for p in paths if p.is_file()], root, check=args.check)
    for path in stale:
        print(f"{path}: {'stale verdicts' if args.check else 'regenerated'}")
    return 1 if (args.check and stale) else 0


def build_parser(only_run: bool = False) -> argparse.ArgumentParser:
    """The command's parser; ``only_run``: just ``run`` and ``check``, whose start-up then
    imports nothing of the results side (the query commands' help needs DuckDB's, pandas's
    and pyarrow.dataset's modules: half a second of a small run's 2)."""
    parser = argparse.ArgumentParser(
        prog="fedsparse", description="Federated sparse learning: runs, sweeps, results."
    )
    parser.add_argument("--version", action="version", version=f"fedsparse {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="run one config and write its per-round trace as Parquet")
    p.add_argument("config", type=Path, help="run config, YAML or JSON")
    p.add_argument("-o", "--output", type=Path, required=True, help="output .parquet file")
    p.set_defaults(func=_cmd_run)
    p = sub.add_parser(
        "check",
        help="check sweep or run configs as `snakemake` would plan them, without running",
        description=(
            "Check sweep configs (or a run config) as the workflow plans them: every value, "
            "and the runs against their data where the config fixes its shape. Several "
            "files are merged as `snakemake --configfile A B` merges them. Unlike "
            "snakemake, a YAML syntax error is reported with its file and line."
        ),
    )
    p.add_argument("configs", type=Path, nargs="+", help="YAML or JSON config files")
    p.add_argument(
        "--json",
        action="store_true",
        help="print the sweep's estimated cost as one JSON object (runs, core_seconds, "
        "memory_bytes, disk_bytes, ...)",
    )
    p.add_argument(
        "--nodes",
        type=_positive_int,
        help="also estimate the wall time on a cluster of this many nodes",
    )
    p.add_argument(
        "--node-cores",
        type=_positive_int,
        default=32,
        help="cores of a cluster node, for --nodes (default: 32)",
    )
    p.add_argument(
        "--digests",
        action="store_true",
        help="also list each data set's and study's digest and whether the results folder "
        "holds its build (what decides that a step reruns)",
    )
    p.set_defaults(func=_cmd_check)
    if only_run:
        return parser
    from .query import METRICS, PARETO_COLUMNS

    p = sub.add_parser("report", help="(re)build the comparison report of results folders")
    _results_folders(p)
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        default=None,
        help="report folder (default: RESULTS/report; with several folders: ./report)",
    )
    p.set_defaults(func=_cmd_report)
    p = sub.add_parser(
        "query",
        help="SQL (DuckDB) over the views runs and traces of results folders",
        description="Run one read-only SELECT over two views: runs (runs.parquet) and "
        "traces (every evaluated round of every run).",
    )
    p.add_argument("sql", help="one SELECT statement, e.g. 'SELECT count(*) FROM runs'")
    _results_folders(p)
    _output_options(p)
    p.set_defaults(func=_cmd_query)
    metrics = "; ".join(f"{m} ({better} is better)" for m, (better, _, _) in METRICS.items())
    p = sub.add_parser(
        "best",
        help="the best configuration per data set and algorithm (mean over seeds)",
        description="Per data set and algorithm, the configuration (everything but the seed) "
        "with the best mean metric over its seeds. A diverged run scores the worst value, so "
        "a configuration with a diverged seed ranks last. Optuna trials are skipped; their "
        "held-out re-runs count. The grid_edges column flags a hyperparameter whose best value is "
        "the smallest or largest of those searched (extend the grid there). The table shows the "
        "data set, algorithm and --by columns, the configuration columns that differ between "
        "the configurations compared (the ones with a single value are listed under it), the "
        "mean metric, seeds, diverged and grid_edges; --all-columns shows every column. CSV and "
        "Parquet always hold every column, so a script reads the same columns from any results. "
        "--pareto COLUMN: the accuracy-against-cost front per data set instead (a configuration "
        "with a diverged run is left out; ties on both are all kept).",
    )
    _results_folders(p)
    p.add_argument(
        "--metric", default="final_objective", help=f"default final_objective; one of: {metrics}"
    )
    p.add_argument(
        "--by",
        action="append",
        default=[],
        metavar="COLUMN[,COLUMN]",
        help="also one best per value of these runs.parquet columns (e.g. partition, sweep)",
    )
    p.add_argument(
        "--pareto",
        default=None,
        metavar="COLUMN",
        help="instead of one best per algorithm: per data set, the configurations that no "
        "other beats on both the metric and COLUMN (lower is better), cheapest first; one of: "
        + ", ".join(PARETO_COLUMNS),
    )
    p.add_argument(
        "--all-columns",
        action="store_true",
        help="the table shows every configuration column, also those with one value or none "
        "(CSV and Parquet always do)",
    )
    _output_options(p)
    p.set_defaults(func=_cmd_best)
    p = sub.add_parser(
        "merge",
        help="merge results folders (e.g. from several machines) into one",
        description="Write the union of results folders as one results folder. A run found "
        "in several is kept once: from the folder where it finished ok, else the first given; "
        "a warning counts runs whose trace rows differ between folders.",
    )
    p.add_argument("sources", type=Path, nargs="+", help="results folders")
    p.add_argument("-o", "--output", type=Path, required=True, help="the merged results folder")
    p.set_defaults(func=_cmd_merge)
    p = sub.add_parser(
        "ledger",
        help="a family's verdicts kept in the repository (reproductions/FAMILY/)",
        description="A family's ledger, reproductions/FAMILY/, holds the runs its verdicts "
        "rest on (runs.parquet and traces/, a results folder), the claims table a report of "
        "them gives (claims.csv) and their provenance (provenance.json: configs, commits, "
        "numerics and package versions, hosts, time measured and estimated). README.md and "
        "docs/ quote verdicts from claims.csv only (`fedsparse docs-verdicts`).",
    )
    actions = p.add_subparsers(dest="action", required=True)
    q = actions.add_parser(
        "record",
        help="write FAMILY's ledger from results folders (the sweeps of --config)",
    )
    q.add_argument("results", type=Path, nargs="+", help="results folders of the sweeps")
    q.add_argument("--family", required=True, help="the family's folder name, e.g. sfedhp")
    q.add_argument(
        "--config",
        action="append",
        required=True,
        help="a config (in config/) the runs come from; once per config",
    )
    q = actions.add_parser(
        "rebuild",
        help="rebuild claims.csv (and report pages) from the stored runs, recomputing none",
    )
    q.add_argument("family", nargs="*", help="families (default: every one with a ledger)")
    q.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if a stored claims.csv differs"
    )
    q.add_argument(
        "-o",
        "--output",
        type=Path,
        default=None,
        help="also keep the report pages, in OUTPUT/FAMILY/",
    )
    q = actions.add_parser(
        "rerun",
        help="recompute FAMILY's runs from scratch with Snakemake, then record its ledger",
    )
    q.add_argument("family", help="the family's folder name")
    q.add_argument(
        "--results-root",
        type=Path,
        default=Path("results") / "ledger",
        help="where each sweep's results folder goes (default results/ledger)",
    )
    q.add_argument(
        "snakemake_args",
        nargs=argparse.REMAINDER,
        help="after --: Snakemake's options (default --cores all), e.g. "
        "-- --profile profiles/slurm",
    )
    for q in actions.choices.values():
        q.add_argument(
            "--out",
            type=Path,
            default=Path("reproductions"),
            help="the ledgers' folder (default reproductions/)",
        )
    p.set_defaults(func=_cmd_ledger)
    p = sub.add_parser(
        "docs-verdicts",
        help="regenerate the verdicts blocks of README.md and docs/*.md from the ledgers",
        description="Every verdict quoted in README.md and docs/*.md sits in a block "
        "'<!-- verdicts: table|summary CSV -->' … '<!-- end verdicts -->' generated from the "
        "claims table CSV it names. This rewrites the blocks that differ; with --check it only "
        "lists them and exits 1 if any does.",
    )
    p.add_argument("--root", type=Path, default=Path("."), help="the checkout (default: .)")
    p.add_argument("--check", action="store_true", help="list stale blocks, change nothing")
    p.set_defaults(func=_cmd_docs_verdicts)
    p = sub.add_parser("tune", help="Optuna studies of a sweep with method: optuna")
    p.add_argument("action", choices=["status", "create", "worker"])
    p.add_argument("sweep", type=Path, help="the sweep config, YAML or JSON")
    p.add_argument("--study", help="study name (see: fedsparse tune status SWEEP)")
    p.add_argument(
        "--results", type=Path, default=None, help="results folder (default: the sweep's results)"
    )
    p.set_defaults(func=_cmd_tune)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(only_run=argv[:1] in (["run"], ["check"])).parse_args(argv)
    default_showwarning = warnings.showwarning

    def one_line(message, category, *rest) -> None:  # our warnings, like our errors
        if issubclass(category, FedsparseWarning):
            print(f"fedsparse: warning: {message}", file=sys.stderr)
        else:
            default_showwarning(message, category, *rest)

    warnings.showwarning = one_line
    try:
        return args.func(args)
    except FedsparseError as exc:
        print(f"fedsparse: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fedsparse: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `fedsparse query ... | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        return 0
    finally:
        warnings.showwarning = default_showwarning


if __name__ == "__main__":
    sys.exit(main())
