"""The published verdicts: each family's ledger, kept in the repository, and the Markdown
made from it, so that every verdict a user reads comes from runs anyone can re-score.

The ledger of a family is the folder ``reproductions/<family>/`` (named as the family's folder
under ``fedsparse/families/``), itself a results folder:

- ``runs.parquet`` and ``traces/``: the runs the verdicts rest on (the union of the sweeps'
  results folders);
- ``claims.csv``: the family's rows of the claims table that a report of those runs gives;
- ``provenance.json``: the configs, sweeps, run counts, the runs' time and the shard jobs' CPU
  beside the cost model's estimate, commits, numerics versions, package versions, hosts.

``record`` writes a ledger from results folders; ``rebuild`` re-scores its stored runs (no run
is recomputed) and says whether ``claims.csv`` is still what they give; ``rerun_commands`` are
the Snakemake commands that compute the runs again from scratch.

README.md and docs/*.md quote verdicts only inside generated blocks::

    <!-- verdicts: table reproductions/hard_thresholding/claims.csv -->
    ...generated...
    <!-- end verdicts -->

``table`` is the claims as a Markdown table (claim, reading, where, paper's number, ours,
seeds, interval, verdict, unmet); ``summary`` one sentence per paper, the index's
(``verdicts.paper_verdicts``); ``brief`` one line of counts per paper, and given the folder
``reproductions`` one per family. ``sync`` regenerates every block from what it names;
``fedsparse docs-verdicts`` runs it (``--check``: only report the blocks that differ, as the
tests do).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from ..atomic import atomic_directory, atomic_write
from ..errors import FedsparseError
from ..layout import RUNS_FILE
from ..training.config import read_config_file
from .claims import AGREES, PAPER_CLAIM, STAND_IN, VARIATION, Family
from .verdicts import paper_verdicts

__all__ = [
    "BLOCK",
    "LEDGERS",
    "family_folder",
    "read_claims",
    "rebuild",
    "rebuilt_claims",
    "record",
    "render",
    "rerun_commands",
    "sync",
    "sync_files",
]

LEDGERS = Path("reproductions")  # the ledgers' folder, in the checkout
CLAIMS = "claims.csv"
PROVENANCE = "provenance.json"
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
    """A verdicts block's generated Markdown.

    Parameters
    ----------
    kind
        ``table`` (the claims as a Markdown table), ``summary`` (one sentence per paper) or
        ``brief`` (one line of counts per paper).
    claims
        A claims table as text cells (:func:`read_claims`).
    provenance
        The ledger's ``provenance.json``, whose configs the summary and brief name; None:
        they name the claims table instead.

    Returns
    -------
    str
        Lines ending in a newline; papers in the order of ``claims``.
    """
    if kind == "brief":
        return _brief(claims, provenance)
    if kind == "summary":
        seeds = sorted({int(v) for v in claims["seeds"] if v not in ("", "0")})
        behind = f"; seeds behind a scored row: {', '.join(map(str, seeds))}" if seeds else ""
        source = f" From {_configs(provenance)}"
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


def _configs(provenance: dict | None) -> str:
    configs = (provenance or {}).get("configs") or []
    return ", ".join(f"`{c}`" for c in configs) or "its claims table"


def _brief(claims: pd.DataFrame, provenance: dict | None, where: str = "") -> str:
    """Per paper one line: the counts in the paper's readings, on its declared stand-ins and
    in our variations (each where it has rows; the paper's readings always), the seeds behind
    the rows and ``where`` they are kept (default: the configs)."""
    from .verdicts import counts, measurements

    out = []
    for paper, rows in claims.groupby("paper", sort=False):
        paper_rows = rows[rows["claim_kind"] == PAPER_CLAIM]
        kind = paper_rows["reading_kind"]
        own = measurements(paper_rows[~kind.isin([VARIATION, STAND_IN])])
        stand = measurements(paper_rows[kind == STAND_IN])
        var = measurements(rows[rows["reading_kind"] == VARIATION])
        seeds = sorted({int(v) for v in rows["seeds"] if v not in ("", "0")})
        parts = [f"{counts(own)} in the paper's readings"] if len(own) or not len(stand) else []
        if len(stand):
            parts.append(f"{counts(stand)} on its stand-ins")
        line = f"- {paper}: " + "; ".join(parts)
        if len(var):
            line += f"; {counts(var)} in our variations"
        seeds_text = "/".join(map(str, seeds)) or "no"
        noun = "seed" if seeds == [1] else "seeds"
        out.append(f"{line} ({seeds_text} {noun}; {where or _configs(provenance)}).\n")
    return "".join(out)


def _all_briefs(folder: Path) -> str:
    """The brief of every family's ledger under ``folder``, in the index's order; a family
    without one says so."""
    from .build import families

    out = []
    for family in families():
        ledger = folder / family_folder(family)
        if (ledger / CLAIMS).is_file():
            claims, prov = read_claims(ledger / CLAIMS), _read_provenance(ledger)
            out.append(_brief(claims, prov, f"`{folder.name}/{ledger.name}/`"))
        else:
            out.append(f"- {family.paper}: no ledger yet, so no verdict.\n")
    return "".join(out)


def _read_provenance(folder: Path) -> dict | None:
    path = folder / PROVENANCE
    return json.loads(path.read_text()) if path.is_file() else None


def sync(text: str, root: Path) -> str:
    """``text`` with every verdicts block regenerated from the CSV it names (relative to
    ``root``); a block naming a missing CSV is an error that names it."""

    def block(m: re.Match) -> str:
        path = root / m["path"]
        if m["kind"] == "brief" and path.is_dir():  # every ledger in the folder
            return m["head"] + _all_briefs(path) + m["tail"]
        if not path.is_file():
            raise FileNotFoundError(f"verdicts block: {m['path']} does not exist")
        provenance = _read_provenance(path.parent)
        return m["head"] + render(m["kind"], read_claims(path), provenance) + m["tail"]

    return BLOCK.sub(block, text)


def sync_files(paths: list[Path], root: Path, check: bool = False) -> list[Path]:
    """Regenerate the verdicts blocks of some files from the claims tables they name.

    Parameters
    ----------
    paths
        The Markdown files.
    root
        The folder the blocks' paths are relative to (the checkout).
    check
        Only report; write nothing.

    Returns
    -------
    list of Path
        The files whose blocks differed from their CSVs, in the order of ``paths``; rewritten
        (atomically) unless ``check``.

    Raises
    ------
    FileNotFoundError
        A block names a claims table that does not exist.
    """
    stale = []
    for path in paths:
        text = path.read_text()
        new = sync(text, root)
        if new != text:
            stale.append(path)
            if not check:
                _write_text(path, new)
    return stale


def record(
    sources: Sequence[Path], family: Family, configs: Sequence[str], out: Path = LEDGERS
) -> Path:
    """Write a family's ledger from results folders, replacing it whole or not at all.

    The ledger holds the union of ``sources`` as a results folder (the runs table and every
    trace), the family's rows of the claims table a report of that copy gives, and the
    provenance.

    Parameters
    ----------
    sources
        The results folders of the sweeps of ``configs``; the family's ledger itself may be
        one, to extend it with new runs (its recorded shard time is kept).
    family
        The family whose ledger is written.
    configs
        The sweep configs, paths as given on the command line (recorded in the provenance).
    out
        The ledgers' folder; the ledger is ``out/<family folder>``.

    Returns
    -------
    Path
        The ledger's folder.

    Raises
    ------
    FedsparseError
        ``sources`` hold no run of the family's algorithms (nothing is written).
    """
    from ..query.merge import merge_results

    folder = out / family_folder(family)
    with atomic_directory(folder, mode=0o755) as tmp:
        merge_results(list(sources), tmp)
        if not set(pd.read_parquet(tmp / RUNS_FILE, columns=["algorithm"])["algorithm"]) & set(
            family.algorithms
        ):
            raise FedsparseError(
                f"ledger: {', '.join(map(str, sources))} hold no run of {family.title}"
            )
        claims = rebuilt_claims(tmp, family)
        provenance = _provenance(tmp, sources, configs)
        claims.to_csv(tmp / CLAIMS, index=False)
        (tmp / PROVENANCE).write_text(json.dumps(provenance, indent=1) + "\n")
    return folder


def rebuilt_claims(ledger: Path, family: Family, pages: Path | None = None) -> pd.DataFrame:
    """The family's rows of the claims table a report of ``ledger`` gives, from its stored runs.

    No run is computed.

    Parameters
    ----------
    ledger
        A results folder (runs table and traces).
    family
        The family whose rows are kept.
    pages
        Where the report's pages go; None: a temporary folder beside ``ledger``, deleted.

    Returns
    -------
    pandas.DataFrame
        The family's paper's rows as text cells, in the report's order, index 0..n-1.
    """
    from .build import build_report

    with tempfile.TemporaryDirectory(prefix=".ledger-report.", dir=ledger.parent) as scratch:
        report = Path(pages) if pages is not None else Path(scratch) / "report"
        build_report(ledger, report)
        claims = read_claims(report / "tables" / "claims.csv")
    return claims[claims["paper"] == family.paper].reset_index(drop=True)


def rebuild(
    family: Family, out: Path = LEDGERS, pages: Path | None = None, check: bool = False
) -> bool:
    """Re-score a family's ledger and compare with its stored claims table, recomputing no run.

    Parameters
    ----------
    family
        The family whose ledger is rebuilt.
    out
        The ledgers' folder.
    pages
        Where the report's pages go; None: a temporary folder, deleted.
    check
        Only compare; write nothing.

    Returns
    -------
    bool
        Whether the stored ``claims.csv`` already was what the ledger's runs give; unless
        ``check``, one that differs is rewritten (atomically).

    Raises
    ------
    FedsparseError
        The ledger has no runs table.
    """
    folder = out / family_folder(family)
    if not (folder / RUNS_FILE).is_file():
        raise FedsparseError(f"ledger: {folder} holds no runs table ({RUNS_FILE}); record it first")
    new = rebuilt_claims(folder, family, pages).to_csv(index=False)
    stored = folder / CLAIMS
    same = stored.is_file() and stored.read_text() == new
    if not same and not check:
        _write_text(stored, new)
    return same


def rerun_commands(
    family: Family,
    results_root: Path,
    out: Path = LEDGERS,
    snakemake_args: Sequence[str] = ("--cores", "all"),
) -> list[tuple[list[str], tuple[str, Path]]]:
    """The Snakemake commands that recompute a family's ledger from scratch.

    Parameters
    ----------
    family
        The family whose ledger is recomputed.
    results_root
        The folder under which each sweep's results folder ``<results_root>/<sweep>`` goes.
    out
        The ledgers' folder.
    snakemake_args
        Arguments given to each ``snakemake`` before its ``--configfile``.

    Returns
    -------
    list of tuple
        One per config the ledger's provenance names, in its order: the command's arguments,
        and ``(config, results folder)``.

    Raises
    ------
    FedsparseError
        The ledger has no ``provenance.json``.
    """
    prov = _read_provenance(out / family_folder(family))
    if prov is None:
        raise FedsparseError(
            f"ledger: {out / family_folder(family) / PROVENANCE} does not exist; "
            "record the ledger first (fedsparse ledger record)"
        )
    commands = []
    for config in prov["configs"]:
        folder = Path(results_root) / read_config_file(config)["sweep"]
        command = ["snakemake", *snakemake_args, "--configfile", config]
        commands.append(([*command, "--config", f"results={folder}"], (config, folder)))
    return commands


def _provenance(ledger: Path, sources: Sequence[Path], configs: Sequence[str]) -> dict:
    """What the ledger's runs are: configs, sweeps, counts, time (the runs' own and the shard
    jobs' CPU, with the cost model's estimate beside it), commits, numerics, packages, hosts."""
    import duckdb

    runs = str(ledger / RUNS_FILE)
    con = duckdb.connect()
    (n, ok, diverged, core, first, last) = con.execute(
        "SELECT count(*), count(*) FILTER (status = 'ok'), count(*) FILTER (status = "
        "'diverged'), sum(wall_time_s), min(finished_at::TIMESTAMPTZ - "
        "to_seconds(wall_time_s)), max(finished_at::TIMESTAMPTZ) FROM read_parquet(?)",
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
    cpu = [_shard_cpu_seconds(Path(s)) for s in sources]
    return {
        "configs": list(configs),
        "sweeps": distinct("sweep"),
        "runs": n,
        "ok": ok,
        "diverged": diverged,
        "run_seconds": round(float(core or 0.0), 1),
        "shard_cpu_seconds": None if None in cpu else round(sum(cpu), 1),
        "estimated_core_seconds": _estimate(configs, distinct("run_id")),
        "configs_estimated_core_seconds": _estimate(configs),
        "span": [t.isoformat(timespec="seconds") if t else None for t in (first, last)],
        "git_commits": distinct("git_commit"),
        "numerics": {alg: versions for alg, versions in numerics},
        "fedsparse": distinct("fedsparse_version"),
        "python": distinct("python_version"),
        "numpy": distinct("numpy_version"),
        "numba": distinct("numba_version"),
        "hosts": distinct("host"),
    }


def _estimate(configs: Sequence[str], run_ids: Sequence[str] | None = None) -> float:
    """The cost model's core-seconds for ``configs`` at this host's rates: of the runs
    ``run_ids`` among them (those recorded), or of every run (None)."""
    from ..sweep.machine import host_rates
    from ..sweep.plan import plan_checked
    from ..sweep.sweep_cost import sweep_cost

    rates = host_rates()
    total = 0.0
    for config in configs:
        sweep = read_config_file(config)
        only = set(run_ids) if run_ids is not None else None
        total += sweep_cost(plan_checked(sweep), rates, None, only).core_seconds
    return round(total, 1)


def _shard_cpu_seconds(results: Path) -> float | None:
    """The shard jobs' CPU time from Snakemake's benchmark files, when the workflow ran them;
    for a ledger given as a source (a ledger extended by new sweeps), the time it recorded."""
    recorded = _read_provenance(results)
    if recorded is not None:
        return recorded.get("shard_cpu_seconds")
    files = sorted((results / "benchmarks" / "shards").glob("*.tsv"))
    if not files:
        return None
    return round(sum(float(pd.read_csv(f, sep="\t")["cpu_time"].iloc[-1]) for f in files), 1)
