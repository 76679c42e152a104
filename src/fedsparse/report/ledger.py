"""The published verdicts: the claims tables kept in the repository and the pages made from
them, so that every verdict a user reads comes from a claims table.

The ledger of a family is the folder ``reproductions/<family>/`` (named as the family's folder
under ``fedsparse/families/``): its ``claims.csv`` (the family's rows of a report's
``tables/claims.csv``) and ``provenance.json`` (the config and the results it was built from:
commit, numerics versions, package versions, host, runs, core time). ``record`` writes both
from a results folder.

README.md and docs/*.md quote verdicts only inside generated blocks::

    <!-- verdicts: table reproductions/hard_thresholding/claims.csv -->
    ...generated...
    <!-- end verdicts -->

``table`` is the claims as a Markdown table (claim, reading, where, paper's number, ours,
seeds, interval, verdict, unmet); ``summary`` one sentence per paper, the index's
(``verdicts.paper_verdicts``). ``sync`` regenerates every block from the CSV it names;
``fedsparse docs-verdicts`` runs it (``--check``: only report the blocks that differ, as the
tests do).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from ..atomic import atomic_write
from .claims import AGREES, PAPER_CLAIM, Family
from .verdicts import paper_verdicts

__all__ = ["BLOCK", "family_folder", "read_claims", "record", "render", "sync", "sync_files"]

BLOCK = re.compile(
    r"(?P<head><!-- verdicts: (?P<kind>table|summary|brief) (?P<path>\S+) -->\n)"
    r"(?P<body>.*?)"
    r"(?P<tail><!-- end verdicts -->)",
    re.S,
)
_TABLE = [
    ("claim", "claim"),
    ("reading", "reading"),
    ("where", "where"),
    ("paper_value", "paper's number"),
    ("ours", "ours"),
    ("seeds", "seeds"),
    ("interval", "95 % interval"),
    ("verdict", "verdict"),
    ("unmet", "unmet"),
]


def _write_text(path: Path, text: str) -> None:
    with atomic_write(path) as fh:
        fh.write(text.encode())


def family_folder(family: Family) -> str:
    """The family's folder name under fedsparse/families/ (its ledger's name)."""
    parts = family.build.__module__.split(".")
    return parts[parts.index("families") + 1]


def read_claims(path: Path) -> pd.DataFrame:
    """A claims table as text cells ('' for empty)."""
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _ours(text: str) -> str:
    """Our measurement's first clause (the index folds the rest)."""
    return text.split("; ", 1)[0]


def render(kind: str, claims: pd.DataFrame, provenance: dict | None = None) -> str:
    """A block's generated Markdown: the claims as a table, or one sentence per paper with
    the config the rows come from (``provenance``) and the seeds behind its scored rows."""
    if kind == "brief":
        return _brief(claims, provenance)
    if kind == "summary":
        seeds = sorted({int(v) for v in claims["seeds"] if v not in ("", "0")})
        behind = f"; seeds behind a scored row: {', '.join(map(str, seeds))}" if seeds else ""
        config = provenance.get("config", "") if provenance else ""
        source = f" From `{config}`" if config else " From its claims table"
        out = []
        for sentence, (_, rows) in zip(
            paper_verdicts(claims), claims.groupby("paper", sort=False), strict=True
        ):
            out.append(f"- {sentence}{source} ({len(rows)} rows{behind}).")
            agree = rows[(rows["verdict"] == AGREES) & (rows["claim_kind"] == PAPER_CLAIM)]
            if len(agree):
                where = "; ".join(
                    f"{r.claim}, {r.reading}, {r.where}: {_ours(r.ours)}"
                    for r in agree.itertuples()
                )
                out[-1] += f" In the paper's readings it agrees only there: {where}."
        return "".join(f"{line}\n" for line in out)
    head = "| " + " | ".join(h for _, h in _TABLE) + " |\n"
    head += "|" + "---|" * len(_TABLE) + "\n"
    rows = []
    for row in claims.itertuples(index=False):
        cells = []
        for column, _ in _TABLE:
            v = str(getattr(row, column, "") or "")
            if column == "ours":
                v = _ours(v)
            elif column == "interval":  # the header says 95 %, the seeds column how many
                v = re.sub(r" \(95 %, (\w+) over \d+ seeds\)", r" (\1)", v)
            cells.append(_cell(v))
        rows.append("| " + " | ".join(cells) + " |\n")
    return head + "".join(rows)


def _brief(claims: pd.DataFrame, provenance: dict | None) -> str:
    """Per paper one line: the counts in the paper's readings and in our variations, the
    config and seeds, and each agreeing row with its conditions (reading, where)."""
    from .verdicts import counts, measurements

    config = (provenance or {}).get("config", "its claims table")
    out = []
    for paper, rows in claims.groupby("paper", sort=False):
        paper_rows = rows[rows["claim_kind"] == PAPER_CLAIM]
        own = measurements(paper_rows[~paper_rows["reading_kind"].isin(["variation"])])
        var = measurements(rows[rows["reading_kind"] == "variation"])
        seeds = sorted({int(v) for v in rows["seeds"] if v not in ("", "0")})
        line = f"- {paper}: {counts(own)} in the paper's readings"
        if len(var):
            line += f", {counts(var)} in our variations"
        line += f" (`{config}`, {'/'.join(map(str, seeds)) or 'no'} seeds)."
        agree = own[own["verdict"] == AGREES]
        if len(agree):
            line += " Agrees: " + "; ".join(
                f"{r.paper_value}: {_ours(r.ours)}, {r.reading}, {r.where}"
                for r in agree.itertuples()
            )
            line += "."
        out.append(line + "\n")
    return "".join(out)


def sync(text: str, root: Path) -> str:
    """``text`` with every verdicts block regenerated from the CSV it names (relative to
    ``root``); a block naming a missing CSV is an error that names it."""

    def block(m: re.Match) -> str:
        path = root / m["path"]
        if not path.is_file():
            raise FileNotFoundError(f"verdicts block: {m['path']} does not exist")
        prov = path.parent / "provenance.json"
        provenance = json.loads(prov.read_text()) if prov.is_file() else None
        return m["head"] + render(m["kind"], read_claims(path), provenance) + m["tail"]

    return BLOCK.sub(block, text)


def sync_files(paths: list[Path], root: Path, check: bool = False) -> list[Path]:
    """The files among ``paths`` whose verdicts blocks differ from their CSVs; rewritten
    (atomically) unless ``check``."""
    stale = []
    for path in paths:
        text = path.read_text()
        new = sync(text, root)
        if new != text:
            stale.append(path)
            if not check:
                _write_text(path, new)
    return stale


def record(results: Path, family: Family, out: Path, config: str) -> Path:
    """Write the ledger of ``family`` from the report of a results folder: its claims rows
    (``results/report/tables/claims.csv``, built first with ``fedsparse report``) and the
    provenance of the runs behind them. Returns the ledger folder."""
    import duckdb

    claims = read_claims(results / "report" / "tables" / "claims.csv")
    mine = claims[claims["paper"] == family.paper]
    if mine.empty:
        raise ValueError(f"{results}: its report holds no claims of {family.title}")
    folder = out / family_folder(family)
    folder.mkdir(parents=True, exist_ok=True)
    runs = str(results / "runs.parquet")
    con = duckdb.connect()
    (n, ok, diverged, core, first, last) = con.execute(
        "SELECT count(*), count(*) FILTER (status = 'ok'), count(*) FILTER "
        "(status = 'diverged'), sum(wall_time_s), min(finished_at), max(finished_at) "
        "FROM read_parquet(?)",
        [runs],
    ).fetchone()

    def distinct(column: str) -> list:
        rows = con.execute(
            f"SELECT DISTINCT {column} FROM read_parquet(?) ORDER BY ALL", [runs]
        ).fetchall()
        return [r[0] for r in rows]

    numerics = con.execute(
        "SELECT algorithm, list(DISTINCT numerics ORDER BY numerics) FROM read_parquet(?) "
        "GROUP BY ALL ORDER BY ALL",
        [runs],
    ).fetchall()
    provenance = {
        "config": config,
        "sweeps": distinct("sweep"),
        "runs": n,
        "ok": ok,
        "diverged": diverged,
        "run_seconds": round(float(core or 0.0), 1),
        "shard_cpu_seconds": _shard_cpu_seconds(results),
        "finished": [str(first), str(last)],
        "git_commits": distinct("git_commit"),
        "numerics": {alg: versions for alg, versions in numerics},
        "fedsparse": distinct("fedsparse_version"),
        "python": distinct("python_version"),
        "numpy": distinct("numpy_version"),
        "numba": distinct("numba_version"),
        "hosts": distinct("host"),
    }
    _write_text(folder / "claims.csv", mine.to_csv(index=False))
    _write_text(folder / "provenance.json", json.dumps(provenance, indent=1) + "\n")
    return folder


def _shard_cpu_seconds(results: Path) -> float | None:
    """The shard jobs' CPU time from Snakemake's benchmark files, when the workflow ran them."""
    files = sorted((results / "benchmarks" / "shards").glob("*.tsv"))
    if not files:
        return None
    return round(sum(float(pd.read_csv(f, sep="\t")["cpu_time"].iloc[-1]) for f in files), 1)
