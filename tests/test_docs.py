"""The README and docs/: short enough to read, links that resolve, the quick start that CI
runs, and a configuration reference generated from the code and up to date."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CODE_SPAN = re.compile(r"`+[^`]*`+")


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, code spans blanked."""
    out, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append((number, CODE_SPAN.sub(lambda m: " " * len(m.group()), line)))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, every character that is
    not a letter, digit, space, hyphen or underscore removed, spaces turned into hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("*", "")
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown file's headings (repeated ones numbered as GitHub does)."""
    seen: dict[str, int] = {}
    out = set()
    for _, line in prose_lines(path.read_text().replace("`", "\x00")):
        match = re.match(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        base = slug(match.group(1).replace("\x00", "`"))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(page: Path) -> list[str]:
    """Each relative link of ``page`` whose file or heading does not exist, as 'line: why'."""
    problems = []
    for number, line in prose_lines(page.read_text()):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # https:, mailto:
                continue
            path_part, _, anchor = target.partition("#")
            dest = (page.parent / path_part).resolve() if path_part else page
            if ROOT not in dest.parents and dest != ROOT:
                problems.append(f"{number}: {target} leaves the repository")
            elif not dest.exists():
                problems.append(f"{number}: {target}: no file {dest.relative_to(ROOT)}")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                problems.append(f"{number}: {target}: no heading #{anchor} in {dest.name}")
            elif anchor and dest.suffix != ".md":
                problems.append(f"{number}: {target}: an anchor into a file that is not Markdown")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_relative_links_resolve(page):
    assert not broken_links(page), "\n".join(broken_links(page))


def test_the_link_check_finds_broken_links(tmp_path, monkeypatch):
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# Top\n\n## Its `code`, and more: (yes)\n")
    page = tmp_path / "README.md"
    page.write_text(
        "[ok](docs/a.md) [ok](docs/a.md#its-code-and-more-yes) [ok](#here) ![img](docs/a.md)\n"
        "# Here\n"
        "`[not a link](nowhere.md)`\n```\n[in code](nowhere.md)\n```\n"
        "[gone](docs/b.md) [bad anchor](docs/a.md#top-1) [out](../x.md) [web](https://x.org/y)\n"
    )
    assert broken_links(page) == [
        "7: docs/b.md: no file docs/b.md",
        "7: docs/a.md#top-1: no heading #top-1 in a.md",
        "7: ../x.md leaves the repository",
    ]


def test_github_slugs():
    assert slug("Exactly `n_trials`, resumable") == "exactly-n_trials-resumable"
    assert slug("Image data sets and the papers' partitions") == (
        "image-data-sets-and-the-papers-partitions"
    )
    assert slug("Optuna on a cluster: PostgreSQL") == "optuna-on-a-cluster-postgresql"
    assert slug("`kind: synthetic`") == "kind-synthetic"


def test_the_readme_is_read_in_ten_minutes():
    assert len(README.read_bytes()) < 12_000


def test_ci_runs_the_readme_test_command():
    """The quick start is exactly two commands, and .ci/run runs the second one (the fast
    tier), then the integration tier the README names."""
    text = README.read_text()
    block = re.search(r"## Quick start\n.*?```bash\n(.*?)```", text, re.DOTALL)
    assert block, "no Quick start block in README.md"
    commands = [line.split("#", 1)[0].strip() for line in block.group(1).splitlines()]
    assert commands == [
        "pip install -e '.[workflow]' && snakemake",
        "pip install -e '.[test]' && python -m pytest",
    ]
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    ci = [line for line in ci if line and not line.startswith("#")]
    assert ci[-2:] == [commands[1], "python -m pytest -m integration"]
    assert "`python -m pytest -m integration`" in text


def test_every_docs_page_is_linked_from_the_readme_or_another_page():
    linked = set()
    for page in PAGES:
        for _, line in prose_lines(page.read_text()):
            for target in LINK.findall(line):
                path_part = target.partition("#")[0]
                if path_part and not re.match(r"^[a-z]+:", path_part):
                    linked.add((page.parent / path_part).resolve())
    orphans = [p.name for p in PAGES[1:] if p.resolve() not in linked]
    assert not orphans, f"docs pages no page links to: {orphans}"


def test_the_generated_reference_is_up_to_date():
    """docs/configuration.md and the column tables of docs/results-schema.md are what
    docs/gen_reference.py makes from the code and the schema."""
    spec = importlib.util.spec_from_file_location(
        "gen_reference", ROOT / "docs" / "gen_reference.py"
    )
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    stale = [p.name for p, text in gen.pages().items() if p.read_text() != text]
    assert not stale, f"out of date: {stale}; run python docs/gen_reference.py"


# -------------------------------------------------------------- verdicts from the ledgers

VERDICT_CELL = re.compile(r"\|\s*\**(agrees|does not agree|inconclusive)\**\s*\|")
VERDICT_PROSE = re.compile(
    r"\*\*(agrees|does not agree)\*\*(?!\s+when)|[(:] (agrees|does not agree)\)"
)


def _outside_blocks(text: str) -> str:
    from fedsparse.report.ledger import BLOCK

    return BLOCK.sub("", text)


def test_quoted_verdicts_are_generated_from_the_ledgers():
    """Every verdicts block of README.md and docs/ is what its claims table gives
    (`fedsparse docs-verdicts` regenerates them), and each names a CSV in the repository."""
    from fedsparse.report.ledger import BLOCK, sync_files

    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    assert sync_files(pages, ROOT, check=True) == []
    named = {m["path"] for p in pages for m in BLOCK.finditer(p.read_text())}
    assert "reproductions/hard_thresholding/claims.csv" in named
    assert "reproductions" in named  # README's one line per paper, from every ledger
    for path in named - {"reproductions"}:
        assert (ROOT / path).is_file() and (ROOT / path).parent.joinpath(
            "provenance.json"
        ).is_file()


@pytest.mark.parametrize(
    "page", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))], ids=str
)
def test_no_verdict_is_written_by_hand(page):
    """A verdict in a table cell or stated as a result ("… as **agrees**", "(…: agrees)")
    outside a generated block is a verdict no claims table carries."""
    text = _outside_blocks(page.read_text())
    assert not VERDICT_CELL.findall(text), page.name
    assert not VERDICT_PROSE.findall(text), page.name


def test_the_verdict_checks_catch_hand_written_verdicts(tmp_path):
    from fedsparse.report.ledger import sync_files

    assert VERDICT_CELL.search("| Sim I | 1.5x | agrees |")
    assert VERDICT_PROSE.search("scores the comparison as **agrees** in both readings")
    assert VERDICT_PROSE.search("(81.41 against 79.89: agrees)")
    assert not VERDICT_PROSE.search("The verdict is **agrees** when the interval lies inside")
    ledger = tmp_path / "reproductions" / "f"
    ledger.mkdir(parents=True)
    (ledger / "claims.csv").write_text(
        "paper,claim,claim_kind,reading,where,paper_value,ours,verdict,seeds,interval,unmet\n"
        'P,c,paper,r,w,≈2x,1.9x,agrees,5,"[1.5, 2.2] (95 %, t over 5 seeds)",\n'
    )
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- verdicts: table reproductions/f/claims.csv -->\nold\n<!-- end verdicts -->\n"
    )
    assert sync_files([page], tmp_path, check=True) == [page]
    assert page.read_text().count("old") == 1  # --check changes nothing
    assert sync_files([page], tmp_path) == [page]
    text = page.read_text()
    assert "| c | r | w | ≈2x | 1.9x | 5 | [1.5, 2.2] (t) | agrees |  |" in text
    assert sync_files([page], tmp_path, check=True) == []
