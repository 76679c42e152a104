"""The reproduction report of a results folder: an index page and one page per family.

``build_report(RESULTS)`` reads ``RESULTS/runs.parquet`` and ``RESULTS/traces/``
and writes ``RESULTS/report/`` (or ``out_dir``). ``build_report([A, B, ...])`` reports on
the union of several results folders (merged as ``fedsparse merge`` does) into ``./report``
(or ``out_dir``)::

    index.html    provenance, every paper claim the results speak to (paper, claim, the
                  paper's number, ours, verdict, link), and the list of pages
    runs.html     every data set: each algorithm's best configuration and objective curves
    pareto.html   the metric against communication: each data set's fronts (report.pareto)
    <key>.html    one page per algorithm family with runs here (its FAMILY.key)
    data.html     partitions and test accuracy (real data), optuna.html (tuned sweeps)
    figures/*.png the figures (also embedded in the pages: each page opens on its own)
    tables/*.csv  the tables, claims.csv the index's claims table

A family is a ``claims.Family`` in its own module, which the family's algorithms name
(``REPORT``, see ``fedsparse.algorithms.registry``); it writes its page and returns its claims.
Every page reads the results through one ``data.ReportData``, opened once per build: the runs
table read once, the traces queried with SQL for what a table or figure shows.

The folder is built next to ``out_dir`` under a temporary name and swapped in
at the end, so a crash never leaves a half-written report.
"""

from __future__ import annotations

from ..lazy import lazy_names
from .build import build_report, families

__all__ = ["FAMILIES", "build_report", "families"]


# FAMILIES is read on first use: a family's page imports this package's modules.
__getattr__ = lazy_names(__name__, {"FAMILIES": families})
