"""Verdicts that wait for their evidence: a comparison at a time budget is scored only when the
runs cover the horizon its claim needs, else the row says "too short to tell" and names the
horizon; and the authors'-code reading names fubtopk as the code's U-top-k."""

from __future__ import annotations

import pytest
from test_gradient_sparsification_report import base, config, write_folder

from fedsparse.families.gradient_sparsification import report as gs_section
from fedsparse.report.claims import AUTHORS_CODE, NOT_MEASURED, VERDICTS, Reading
from fedsparse.report.page import Page

FIG4 = "FAB-top-k has a better loss at a fixed time"
FIG5 = "Algorithm 3 has a better loss than"
HEADLINE = "Up to 40 %"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """D = 40, k = 8 (a periodic-k cycle is 5 rounds), 40 rounds at beta = 10."""
    root = tmp_path_factory.mktemp("horizon")
    configs = [
        config(a, p, 10.0)
        for a, p in (
            ("fabtopk", base()),
            ("fubtopk", base()),
            ("utopk", base()),
            ("periodick", base()),
            ("sendall", {"stepsize": 0.5, "batch_size": 10}),
            ("fabtopk", base(k_control="online_extended", window=5)),
            ("fabtopk", base(k_control="exp3")),
        )
    ]
    write_folder(root, configs)
    return root


def build(folder, tmp_path):
    tables = tmp_path / "tables"
    tables.mkdir(exist_ok=True)
    return gs_section.build(Page(tmp_path), folder, tables)


def row(claims, start):
    return next(c for c in claims if c.claim.startswith(start))


def test_long_enough_runs_are_scored_and_short_ones_wait(folder, tmp_path):
    claims = build(folder, tmp_path)
    # Fig. 4: 3 cycles of ceil(40 / 8) = 5 rounds; periodic-k's 40 rounds cover them
    fig4 = row(claims, FIG4)
    assert fig4.verdict in VERDICTS[:2] and "too short" not in fig4.ours
    # Figs. 5-7: Algorithm 3's 40 rounds are far from the bandits' T = 5,780
    fig5 = row(claims, FIG5)
    assert fig5.verdict == NOT_MEASURED
    assert fig5.ours.startswith("too short to tell: Algorithm 3's runs cover 40 rounds")
    assert "the claim needs 5,780" in fig5.ours and "at this budget:" in fig5.ours
    assert "fabtopk exp3" in fig5.ours  # the values measured stay on the row
    assert "largest gain" in row(claims, HEADLINE).ours  # from Fig. 4's comparison only


def test_a_fig4_comparison_on_too_short_a_horizon(folder, tmp_path, monkeypatch):
    monkeypatch.setattr(gs_section, "CYCLES", 10)  # 10 cycles of 5 rounds: 50 > 40
    claims = build(folder, tmp_path)
    for what in ("loss", "test accuracy"):
        fig4 = row(claims, f"FAB-top-k has a better {what} at a fixed time")
        assert fig4.verdict == NOT_MEASURED
        assert fig4.ours.startswith(
            "too short to tell: periodic-k's runs cover 40 rounds within the budget, the claim "
            "needs 50 (10 periodic-k cycles of ceil(D/k) = 5 rounds)"
        )
    headline = row(claims, HEADLINE)  # every comparison behind it is too short
    assert headline.verdict == NOT_MEASURED and headline.ours.startswith("too short to tell")
    fair = row(claims, "FAB-top-k: every client")  # not a comparison at a budget: scored
    assert fair.verdict in VERDICTS[:2]


def test_controllers_are_scored_once_their_horizon_is_covered(folder, tmp_path, monkeypatch):
    monkeypatch.setattr(gs_section, "CONTROLLER_HORIZON", 30)
    fig5 = row(build(folder, tmp_path), FIG5)
    assert fig5.verdict in VERDICTS[:2] and "too short" not in fig5.ours


def test_the_authors_reading_names_fubtopk_the_codes_u_top_k(folder, tmp_path, monkeypatch):
    authors = Reading("the authors' code", AUTHORS_CODE, "everything here", lambda c: True)
    monkeypatch.setattr(gs_section, "READINGS", (authors,))
    claims = build(folder, tmp_path)
    fig4 = row(claims, FIG4)
    assert fig4.reading_kind == AUTHORS_CODE and "(fubtopk: the code's U_top_K)" in fig4.ours
    assert "fubtopk" in fig4.ours.split("(")[0] and "utopk" not in fig4.ours.split("(")[0]
    fub = row(claims, "FUB-top-k is similar")
    assert fub.verdict == NOT_MEASURED and "tree" in fub.ours
