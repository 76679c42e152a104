"""The ``fedsparse`` command."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __version__
from .errors import FedsparseError


def _cmd_run(args: argparse.Namespace) -> int:
    from .config import normalize_run_config, read_config_file
    from .experiment import run_trace
    from .results import write_parquet_atomic

    cfg = normalize_run_config(read_config_file(args.config))
    table = run_trace(cfg)
    write_parquet_atomic(table, args.output)
    last = table.slice(table.num_rows - 1).to_pylist()[0]
    print(
        f"{cfg['algorithm']} on {last['dataset']}: round {last['round']}, "
        f"objective {last['objective']:.6g}, status {last['status']} -> {args.output}"
    )
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from .report import build_report

    if not (args.results / "runs.parquet").is_file():
        raise FedsparseError(f"{args.results}: no runs.parquet here (not a results folder?)")
    html = build_report(args.results, args.output)
    print(f"report -> {html}")
    return 0


def _cmd_tune(args: argparse.Namespace) -> int:
    import json

    from .config import read_config_file
    from .pipeline import setup_logging
    from .tune import create_study, run_worker, study_status

    sweep = read_config_file(args.sweep)
    results = args.results or Path(sweep.get("results", "results"))
    if args.action == "status":
        for row in study_status(sweep, results):
            print(json.dumps(row, default=str))
        return 0
    if not args.study:
        raise FedsparseError(f"tune {args.action}: --study is required")
    setup_logging(None)
    if args.action == "create":
        create_study(sweep, args.study, results)
    else:  # an extra worker, e.g. on another machine sharing a PostgreSQL study
        run_worker(sweep, args.study, results / "data", results)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fedsparse", description="Federated sparse learning: runs, sweeps, results."
    )
    parser.add_argument("--version", action="version", version=f"fedsparse {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="run one config and write its per-round trace as Parquet")
    p.add_argument("config", type=Path, help="run config, YAML or JSON")
    p.add_argument("-o", "--output", type=Path, required=True, help="output .parquet file")
    p.set_defaults(func=_cmd_run)
    p = sub.add_parser("report", help="(re)build the comparison report of a results folder")
    p.add_argument(
        "results",
        type=Path,
        nargs="?",
        default=Path("results"),
        help="results folder holding runs.parquet and traces/ (default: results)",
    )
    p.add_argument(
        "-o", "--output", type=Path, default=None, help="report folder (default: RESULTS/report)"
    )
    p.set_defaults(func=_cmd_report)
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
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except FedsparseError as exc:
        print(f"fedsparse: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fedsparse: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
