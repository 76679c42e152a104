"""Every ``fedsparse ...`` command in a code block of README.md or of a page of docs/ runs, on
results shaped like the quick sweep's (``config/quick.yaml`` with toy sizes, built as the
workflow builds them).

Each block runs in a folder of its own holding ``results/quick/`` (where the workflow writes the
quick sweep: ``results/<sweep>``) and, where the block names them, ``results_laptop/`` and
``results_cluster/`` (the same results split by data set, as from two machines) and ``run.yaml``.
A block that needs other results is marked in its page by an HTML comment just before it,
``<!-- needs: config/gs-quick.yaml -->``, and is skipped with that reason. A command must exit 0
and show rows: a table of at least one row, or a file it names that exists.
"""

from __future__ import annotations

import copy
import re
import shlex
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import SMALL_LINEAR, file_digests, run_sweep

from fedsparse.cli import main
from fedsparse.layout import Layout

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]  # the README and the pages it links to
NEEDS = re.compile(r"<!--\s*needs:\s*(.*?)\s*-->")
FENCE = re.compile(r"^(\s*)```")
SPLIT = ("results_laptop", "results_cluster")  # the merge example's folders from two machines


@dataclass
class Block:
    line: int  # of the opening fence, 1-based
    commands: list[list[str]]  # argv of each fedsparse command, without "fedsparse"
    needs: str | None  # the reason from a <!-- needs: ... --> marker


def readme_blocks(text: str) -> list[Block]:
    """The code blocks of ``text`` that run ``fedsparse``, with their ``needs`` markers."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        if not FENCE.match(lines[i]):
            i += 1
            continue
        start, body = i, []
        i += 1
        while i < len(lines) and not FENCE.match(lines[i]):
            body.append(lines[i])
            i += 1
        i += 1  # past the closing fence
        commands = fedsparse_commands(body)
        if commands:
            before = [x for x in lines[:start] if x.strip()]
            marker = NEEDS.search(before[-1]) if before else None
            blocks.append(Block(start + 1, commands, marker.group(1) if marker else None))
    return blocks


def fedsparse_commands(body: list[str]) -> list[list[str]]:
    """Each command line starting with ``fedsparse``, joined with its continuation lines (an
    open quote or a trailing backslash), split as the shell splits it, comments dropped."""
    commands, i = [], 0
    while i < len(body):
        if not body[i].lstrip().startswith("fedsparse "):
            i += 1
            continue
        text = body[i]
        while True:
            try:
                argv = shlex.split(text, comments=True)
                if not text.rstrip().endswith("\\"):
                    break
            except ValueError:  # an open quote: the command goes on
                pass
            i += 1
            if i == len(body):
                raise AssertionError(f"unterminated command: {text!r}")
            text = text.rstrip().removesuffix("\\") + "\n" + body[i]
        commands.append(argv[1:])
        i += 1
    return commands


README_BLOCKS = readme_blocks(README.read_text())
PAGE_BLOCKS = {page: readme_blocks(page.read_text()) for page in PAGES}
BLOCKS = [block for blocks in PAGE_BLOCKS.values() for block in blocks]
BLOCK_IDS = [
    f"{page.relative_to(ROOT)}:{block.line}"
    for page, blocks in PAGE_BLOCKS.items()
    for block in blocks
]


def quick_shaped() -> dict:
    """config/quick.yaml at toy sizes: its data set names, algorithms and grid, in seconds."""
    cfg = copy.deepcopy(yaml.safe_load((ROOT / "config" / "quick.yaml").read_text()))
    cfg.update(rounds=8, embedding_sample=0)  # no t-SNE: slow, and not what is tested
    cfg["grid"]["stepsize"] = cfg["grid"]["stepsize"][1:3]  # two values: grid edges still flagged
    for spec in cfg["datasets"].values():
        data = spec["data"]
        data.update(clients=4, samples_per_client=20, dim=30, support=5)
        if "positives" in data:
            data["positives"] = 5
    cfg["grid"]["sparsity"] = [8]
    return cfg


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> Path:
    """A folder holding ``results/quick`` of the quick-shaped sweep, the same split by data set
    into ``results_laptop`` (the first) and ``results_cluster`` (the others), and ``run.yaml``."""
    from fedsparse.query.read import read_traces
    from fedsparse.results.aggregate import write_traces_dataset
    from fedsparse.results.schema import write_parquet_atomic

    root = tmp_path_factory.mktemp("readme")
    cfg = quick_shaped()
    with warnings.catch_warnings():  # the largest step sizes may overflow, as on the real data
        warnings.simplefilter("ignore", RuntimeWarning)
        results = run_sweep(root / Layout.of_sweep(cfg).root, cfg)  # results/quick
    runs, traces = pq.read_table(results / "runs.parquet"), read_traces(results)
    names = list(cfg["datasets"])
    for folder, part in zip(SPLIT, (names[:1], names[1:]), strict=True):
        keep = pc.field("dataset").isin(part)
        write_parquet_atomic(runs.filter(keep), root / folder / "runs.parquet")
        write_traces_dataset(traces.filter(keep), root / folder / "traces")
    name, spec = next(iter(cfg["datasets"].items()))
    run = {"dataset": {**spec["data"], "name": name}, "model": spec["model"], "algorithm": "fedht"}
    params = {k: v[0] for k, v in cfg["grid"].items()}
    (root / "run.yaml").write_text(yaml.safe_dump({**run, "params": params, "rounds": 5}))
    return root


def workspace(toy: Path, block: Block, dest: Path) -> Path:
    """A fresh folder for ``block``: the folders and files it names (``results`` unless it
    writes it), copied so that what it writes stays its own."""
    words = {w for argv in block.commands for w in argv}
    written = {
        argv[i + 1]
        for argv in block.commands
        for i, w in enumerate(argv[:-1])
        if w in ("-o", "--output")
    }
    for name in ("results", *SPLIT):
        if (name == "results" or name in words) and name not in written:
            shutil.copytree(toy / name, dest / name)
    if "run.yaml" in words:
        shutil.copy(toy / "run.yaml", dest)
    return dest


def run_command(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse: unknown option or command
        rc = exc.code
    out = capsys.readouterr()
    return rc, out.out, out.err


def check_command(argv: list[str], rc: int, out: str, err: str, cwd: Path) -> None:
    """Exit 0, nothing on stderr, and rows: a table with at least one, a file that exists."""
    shown = f"fedsparse {shlex.join(argv)}"
    assert rc == 0 and not err, f"{shown}: exit {rc}: {err.strip()}"
    if "-o" in argv or "--output" in argv:
        target = cwd / argv[argv.index("-o" if "-o" in argv else "--output") + 1]
        assert target.exists(), f"{shown}: wrote no {target.name}"
        rows = re.search(r"(\d+) (rows|runs)\b", out)
        if argv[0] != "run":
            assert rows and int(rows.group(1)) > 0, f"{shown}: no rows: {out}"
        return
    if argv[0] == "report":
        html = Path(out.split("report -> ", 1)[1].strip())
        assert html.exists(), f"{shown}: no {html}"
        return
    counts = re.search(r"^\((\d+) rows?\)$|\((\d+) in all;", out, re.MULTILINE)
    assert counts, f"{shown}: not a table: {out[:300]}"
    assert int(counts.group(1) or counts.group(2)) > 0, f"{shown}: no rows"


def run_block(block: Block, toy: Path, dest: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(workspace(toy, block, dest))
    for argv in block.commands:
        rc, out, err = run_command(argv, capsys)
        check_command(argv, rc, out, err, dest)


@pytest.mark.parametrize("block", BLOCKS, ids=BLOCK_IDS)
def test_readme_block_runs(block, toy, tmp_path, capsys, monkeypatch):
    if block.needs:
        pytest.skip(f"needs {block.needs}")
    run_block(block, toy, tmp_path, capsys, monkeypatch)


def test_the_readme_blocks_are_found():
    """The parser sees the commands the README and docs/ document (a parser that finds none
    would pass every block), and the README's own tour of the results has some."""
    commands = {argv[0] for b in BLOCKS if not b.needs for argv in b.commands}
    assert {"query", "best", "merge", "report", "run"} <= commands
    sql = [a[1] for b in BLOCKS for a in b.commands if a[0] == "query"]
    assert any("\n" in q and "GROUP BY ALL" in q for q in sql)  # multi-line SQL joined whole
    assert all(b.needs for b in BLOCKS if any(a[0] == "tune" for a in b.commands))
    in_readme = {argv[0] for b in README_BLOCKS if not b.needs for argv in b.commands}
    assert {"query", "best"} <= in_readme


BROKEN = {  # a README block a user could write, and what the check must say
    "metric the results lack": ("fedsparse best --metric final_test_accuracy", "exit 2"),
    "unknown option": ("fedsparse best --metrics final_objective", "exit 2"),
    "data set not in the results": (
        "fedsparse query \"SELECT * FROM runs\n  WHERE dataset = 'sim-linear-a0.5-b0.5'\"",
        "no rows",
    ),
    "bad sql": ('fedsparse query "SELECT nope FROM runs"', "exit 2"),
    "file not written": ('fedsparse query "SELECT 1 WHERE false" -o empty.csv', "no rows"),
}


@pytest.mark.parametrize("case", BROKEN, ids=list(BROKEN))
def test_a_broken_readme_command_fails(case, toy, tmp_path, capsys, monkeypatch):
    command, message = BROKEN[case]
    (block,) = readme_blocks(f"Try:\n\n```bash\n# a comment\n{command}\n```\n")
    with pytest.raises(AssertionError, match=message):
        run_block(block, toy, tmp_path, capsys, monkeypatch)


def test_a_needs_marker_skips_only_its_block():
    text = (
        "<!-- needs: config/gs-quick.yaml -->\n```bash\nfedsparse best\n```\n\n"
        "```bash\nsnakemake\nfedsparse query 'SELECT 1' \\\n  --limit 5\n```\n"
    )
    marked, plain = readme_blocks(text)
    assert marked.needs == "config/gs-quick.yaml" and marked.commands == [["best"]]
    assert plain.needs is None and plain.commands == [["query", "SELECT 1", "--limit", "5"]]


# ---- each config a results folder of its own: the README's quick start runs the
# default sweep, then config/quick.yaml, in one clone; their data sets even share names.


def tiny_sweep(name: str, dim: int) -> dict:
    """A sweep of seconds called ``name``: its data set has the other's name, not its data."""
    return {
        "sweep": name,
        "rounds": 5,
        "embedding_sample": 0,
        "datasets": {"sim": {"data": {**SMALL_LINEAR, "dim": dim}}},
        "algorithms": {"fedht": {}},
        "grid": {"stepsize": [0.01, 0.001], "local_steps": [2], "sparsity": [5]},
    }


def sweeps_read(argv: list[str], capsys) -> set[str]:
    """The sweep labels of the runs ``fedsparse query ... argv`` reads."""
    sql = "SELECT DISTINCT sweep FROM runs"
    rc, out, err = run_command(["query", sql, *argv, "--format", "csv"], capsys)
    lines = [line.strip('"') for line in out.splitlines()]
    assert rc == 0 and not err and lines[0] == "sweep", (out, err)
    return set(lines[1:])


@pytest.mark.integration  # two whole Snakemake sweeps
def test_two_configs_in_one_folder_keep_their_own_results(tmp_path, capsys, monkeypatch):
    """Two sweeps run one after the other with `snakemake --configfile` in one working folder:
    each writes results/<sweep>/ (runs, traces, data, report), the second leaves the first's
    byte-identical, and the readers' default reads the only one, then asks which."""
    from snakemake_helpers import snakemake

    monkeypatch.chdir(tmp_path)
    configs = {"first": tiny_sweep("first", 30), "second": tiny_sweep("second", 40)}
    for name, cfg in configs.items():
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(cfg))
    first, second = Path("results/first"), Path("results/second")

    snakemake(tmp_path, "--configfile", "first.yaml")
    assert sorted(p.name for p in Path("results").iterdir()) == ["first"]
    assert sweeps_read([], capsys) == {"first"}  # the default: the only sweep's folder
    before = file_digests(first)

    snakemake(tmp_path, "--configfile", "second.yaml")
    assert file_digests(first) == before  # runs, traces, data and report untouched
    for folder, name in ((first, "first"), (second, "second")):
        assert set(pq.read_table(folder / "runs.parquet")["sweep"].to_pylist()) == {name}
        assert (folder / "report" / "index.html").is_file()
        assert sweeps_read([str(folder)], capsys) == {name}
    # the same data set name, each sweep's own data
    assert file_digests(first / "data" / "sim") != file_digests(second / "data" / "sim")

    for argv in (["best"], ["report"]):  # two sweeps: one line asks which to name
        rc, out, err = run_command(argv, capsys)
        assert rc == 2 and "results/first, results/second" in err and len(err.splitlines()) == 1
    rc, _, err = run_command(["best", "results"], capsys)  # the folder of folders, named
    assert rc == 2 and "results/first, results/second" in err, err
    assert sweeps_read(["results/first", "results/second"], capsys) == {"first", "second"}


def test_a_results_folder_of_an_older_version_still_reads(toy, tmp_path, capsys, monkeypatch):
    """results/runs.parquet, as every sweep wrote it before results/<sweep>: named, and found
    by default while it is the only results folder."""
    shutil.copytree(toy / "results" / "quick", tmp_path / "results")
    monkeypatch.chdir(tmp_path)
    for argv in (["best"], ["best", "results"], ["report", "results"], ["report"]):
        check_command(argv, *run_command(argv, capsys), tmp_path)
    shutil.copytree(toy / "results" / "quick", tmp_path / "results" / "quick")  # a new sweep
    rc, _, err = run_command(["best"], capsys)
    assert rc == 2 and "results, results/quick" in err, err
    check_command(["best", "results"], *run_command(["best", "results"], capsys), tmp_path)
