"""The index's verdicts: per paper, one sentence and a table of the claims it scores, the rows
where the paper makes no claim and those not measured folded under one summary line each, so
that every paper's verdict reads in a screenful.

One row per measurement: a row that repeats another reading's measurement (``same_runs_as``:
two readings that generate the same data, which a sweep runs once) is shown and counted once,
its reading cell naming both readings.
"""

from __future__ import annotations

import html
import re

import pandas as pd

from . import pareto
from .claims import (
    AGREES,
    DERIVED,
    DISAGREES,
    INCONCLUSIVE,
    NO_CLAIM,
    NOT_AT_SETTING,
    NOT_MEASURED,
    PAPER_CLAIM,
    SCORED,
    STAND_IN,
    STAND_IN_PREFIX,
    VARIATION,
    VARIATION_CLAIM,
)

__all__ = [
    "COMMUNICATION",
    "claims_section",
    "counts",
    "front_link",
    "measurements",
    "paper_verdicts",
]

# a claim about communication (sFedHP's fewer bits, FAB-top-k at a fixed time): cites the fronts
COMMUNICATION = re.compile(r"\bbits?\b|\bbytes?\b|communicat|time budget|fixed time", re.I)
_WORDS = {
    AGREES: "agree",
    DISAGREES: "do not agree",
    INCONCLUSIVE: "inconclusive",
    NOT_AT_SETTING: "not at the paper's setting",
    NOT_MEASURED: "not measured here",
    NO_CLAIM: "where the paper makes no claim",
}
_SAME = ["paper", "claim", "claim_kind", "where", "link", "verdict"]


def measurements(claims: pd.DataFrame) -> pd.DataFrame:
    """The claims with each measurement once: a row whose ``same_runs_as`` names a reading
    that has the same row (paper, claim, where, link, verdict) is dropped, and that row's
    ``readings`` ("name (kind)", what the index shows) names both readings. Order kept."""
    claims = claims.reset_index(drop=True)
    keys = claims.reindex(columns=[*_SAME, "reading"]).fillna("")
    rows = list(keys.itertuples(index=False, name=None))
    first = {row: i for i, row in reversed(list(enumerate(rows)))}
    reuse = claims.reindex(columns=["same_runs_as"])["same_runs_as"].fillna("").astype(str)
    named = zip(claims["reading"].fillna(""), claims["reading_kind"].fillna(""), strict=True)
    readings = [f"{r} ({k})" if r else "" for r, k in named]
    keep = [True] * len(claims)
    for i, row in enumerate(rows):
        source = first.get((*row[:-1], reuse.iloc[i])) if reuse.iloc[i] else None
        if source is not None and source != i:
            keep[i] = False
            readings[source] += f"; {row[-1]} ({claims['reading_kind'].iloc[i]}, the same runs)"
    return claims.assign(readings=readings)[keep].reset_index(drop=True)


def counts(rows: pd.DataFrame) -> str:
    """'3 agree, 1 do not agree, 2 not measured here' (verdicts that occur, in order)."""
    n = rows["verdict"].value_counts()
    parts = [f"{n[v]} {w}" for v, w in _WORDS.items() if n.get(v, 0)]
    return ", ".join(parts) or "none"


def _names(rows: pd.DataFrame) -> str:
    """The rows' readings, each of their '; '-separated parts once and their stand-ins last
    (stand-in readings share most of their parts), in order of first appearance."""
    parts, stand_ins = {}, {}
    for reading in (r for r in rows["reading"] if r):
        into = parts
        for part in _parts(reading):
            if part.startswith(STAND_IN_PREFIX):  # the reading's stand-ins follow
                into, part = stand_ins, part.removeprefix(STAND_IN_PREFIX)
            into[part] = None
    text = "; ".join(parts)
    if stand_ins:
        label = "stand-ins" if len(stand_ins) > 1 else "stand-in"
        text = "; ".join(t for t in (text, f"{label}: " + "; ".join(stand_ins)) if t)
    return text or "unnamed"


def _parts(reading: str) -> list[str]:
    """``reading`` split at the '; ' outside parentheses."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(reading):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and reading.startswith("; ", i):
            out.append(reading[start:i])
            start = i + 2
    return [*out, reading[start:]]


def _by_reading(own: pd.DataFrame) -> str:
    """Each of the paper's own readings' counts; a reading whose rows are another's runs says so."""
    parts = []
    for name, rows in own.groupby("reading", sort=False):
        text = f"{name} ({rows['reading_kind'].iloc[0]}): {counts(rows)}"
        same = rows.get("same_runs_as", pd.Series(dtype=str)).fillna("")
        for other in dict.fromkeys(s for s in same if s):
            k = int((same == other).sum())
            text += f", {'all' if k == len(rows) else k} on the runs of {other}"
        parts.append(text)
    return "; ".join(parts)


def paper_verdicts(claims: pd.DataFrame) -> list[str]:
    """Per paper, one sentence: the verdict in the paper's own readings (each measurement
    counted once), then per reading where it has several, then on the declared stand-ins, then
    in our variations (measurements outside the paper's setting), then our derived expectations
    (never counted as the paper's claims)."""
    out = []
    for paper, rows in claims.groupby("paper", sort=False):
        paper_rows = rows[rows["claim_kind"] == PAPER_CLAIM]
        kind = paper_rows["reading_kind"]
        own = paper_rows[~kind.isin([VARIATION, STAND_IN])]
        stand = paper_rows[kind == STAND_IN]
        var = rows[
            (rows["claim_kind"] == VARIATION_CLAIM)
            | ((rows["claim_kind"] == PAPER_CLAIM) & (kind == VARIATION))
        ]
        if own["reading"].nunique() > 1:  # its text and its authors' code: a verdict in each
            text = (
                f"{paper}: in the paper's readings, {counts(measurements(own))} "
                f"({_by_reading(own)})"
            )
        elif own.empty:
            text = f"{paper}: in the paper's own reading: none"
        else:
            text = f"{paper}: in the paper's reading ({_names(own)}): {counts(own)}"
        if len(stand):
            text += f"; on its stand-ins ({_names(stand)}): {counts(measurements(stand))}"
        if len(var):
            text += f"; in our variations ({_names(var)}): {counts(measurements(var))}"
        derived = rows[rows["claim_kind"] == DERIVED]
        if len(derived):
            text += (
                "; derived expectations of ours (not the paper's claims): "
                f"{counts(measurements(derived))}"
            )
        only = own.loc[own["ours"].str.startswith("measured only in a variation"), "claim"]
        if len(only):
            text += (
                f". Measured only in a variation: {len(only)} claim{'s' if len(only) > 1 else ''}"
            )
        out.append(text + ".")
    return out


def claims_section(html_parts: list[str], claims: pd.DataFrame, fronts: dict[str, str]) -> None:
    """Append the index's verdicts: per paper its sentence, and its measurements in tables.

    The scored measurements come first; those not at the paper's setting, in our variations,
    where the paper makes no claim, and not measured here are each folded under one line.

    Parameters
    ----------
    html_parts
        The index's HTML fragments, appended to.
    claims
        The claims table's rows (``tables/claims.csv``); papers are shown in its order.
    fronts
        Section to the slug of its front on the Pareto page: claims about communication link
        to it.
    """
    add = html_parts.append
    add('<h2 id="claims">Paper claims and our measurements</h2>')
    if claims.empty:
        add('<p class="note">These results hold no runs any paper claim is about.</p>')
        return
    sentences = paper_verdicts(claims)
    items = "".join(f"<li>{html.escape(t)}</li>" for t in sentences)
    add(f'<ul class="verdicts">{items}</ul>')
    add(
        '<p class="muted">Verdicts count measurements, each once. Scored rows first; the rows '
        "not at the paper's setting (each says what its runs lack), those in our variations and "
        "those not measured here are folded below each paper. A reading names a choice the paper "
        "leaves open; a variation is ours. A paper's claim is scored only from runs at its "
        "setting (data, model, rounds, hyperparameters, methods, seeds): agrees when the 95 % "
        "interval of our measurement lies inside the claim at its tolerance, does not agree "
        "when it lies outside, inconclusive otherwise. Every row is in tables/claims.csv."
        + (
            f' Claims about communication also link to the <a href="{pareto.PAGE}">fronts</a>.'
            if fronts
            else ""
        )
        + "</p>"
    )
    for i, (paper, group) in enumerate(claims.groupby("paper", sort=False)):
        rows = measurements(group)
        add(f'<h3 id="paper-{i}">{html.escape(paper)}</h3>')
        outside = rows["claim_kind"] == VARIATION_CLAIM
        scored = rows[rows["verdict"].isin(SCORED) & ~outside]
        if len(scored):
            add(_table(scored, fronts))
        for verdict, what in (
            (NOT_AT_SETTING, "not at the paper's setting (what is unmet in each row)"),
            (VARIATION_CLAIM, "in our variations (outside the paper's setting, not its verdict)"),
            (NO_CLAIM, "where the paper makes no claim (other settings than its own)"),
            (NOT_MEASURED, "not measured here"),
        ):
            if verdict == VARIATION_CLAIM:
                folded = rows[outside]
            else:
                folded = rows[(rows["verdict"] == verdict) & ~outside]
            if len(folded):
                n = len(folded)
                add(
                    f"<details><summary>{n} claim{'s' if n != 1 else ''} {what}"
                    f"{_why(folded)}</summary>{_table(folded, fronts)}</details>"
                    if verdict == NOT_MEASURED
                    else f"<details><summary>{n} measurement{'s' if n != 1 else ''} {what}"
                    f"</summary>{_table(folded, fronts)}</details>"
                )
        notes = "".join(
            f"<li><b>{html.escape(r.reading)}</b> ({html.escape(r.reading_kind)}): "
            f"{html.escape(r.reading_description)}</li>"
            for r in group.drop_duplicates(["reading", "reading_description"]).itertuples()
            if r.reading
        )
        if notes:
            add(f'<details class="muted"><summary>The readings</summary><ul>{notes}</ul></details>')


def _why(rows: pd.DataFrame) -> str:
    """': no runs of this family …' when every row gives the same reason."""
    reasons = rows["ours"].unique()
    return f": {html.escape(reasons[0])}" if len(reasons) == 1 else ""


def front_link(where: str, fronts: dict[str, str]) -> str:
    """pareto.html, at the front of the data set ``where`` names (the longest name found)."""
    named = [s for s in fronts if isinstance(where, str) and s in where]
    if not named:
        return pareto.PAGE
    return f"{pareto.PAGE}#{pareto.anchor(fronts[max(named, key=len)])}"


def _table(rows: pd.DataFrame, fronts: dict[str, str]) -> str:
    head = ["claim", "reading", "where", "paper's number", "ours", "seeds", "95 % interval"]
    head += ["verdict", ""]
    body = []
    for c in rows.itertuples():
        link = f'<a href="{html.escape(c.link)}">details</a>' if c.link else ""
        if fronts and COMMUNICATION.search(c.claim):
            link += f' <a href="{html.escape(front_link(c.where, fronts))}">front</a>'
        claim = html.escape(c.claim) + (
            " <i>(derived: ours)</i>" if c.claim_kind == DERIVED else ""
        )
        cells = [claim] + [html.escape(str(v)) for v in (c.readings, c.where, c.paper_value)]
        cells.append(_ours(str(c.ours)))
        cells.append(html.escape(_text(getattr(c, "seeds", ""))))
        interval, tolerance = _text(getattr(c, "interval", "")), _text(getattr(c, "tolerance", ""))
        cells.append(
            html.escape(interval) + (f"<br><i>{html.escape(tolerance)}</i>" * bool(tolerance))
        )
        tds = "".join(f"<td>{v}</td>" for v in cells)
        cls = {AGREES: "agree", DISAGREES: "disagree"}.get(c.verdict, "unmeasured")
        verdict = html.escape(c.verdict)
        unmet = _text(getattr(c, "unmet", ""))
        if unmet:
            verdict += f"<br><small>unmet: {html.escape(unmet)}</small>"
        body.append(f'<tr>{tds}<td class="{cls}">{verdict}</td><td>{link}</td></tr>')
    ths = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    return f"<table><thead><tr>{ths}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _text(value) -> str:
    """A claims-table cell as text: '' for a missing value (a CSV read back holds NaN)."""
    if value is None or (isinstance(value, float) and value != value) or value == "":
        return ""
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _ours(text: str) -> str:
    """Our measurement's first clause; the rest (seeds, best config, grid notes) folded."""
    head, sep, rest = text.partition("; ")
    if not sep:
        return html.escape(text)
    return f"<details><summary>{html.escape(head)}</summary>{html.escape(rest)}</details>"
