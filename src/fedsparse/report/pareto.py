"""The report's accuracy-against-communication page (``pareto.html``).

Per data set (a report section) with more than one algorithm: every configuration (mean over
seeds) as a faint point of its metric against its total bytes (up + down, log axis), the front of
each algorithm, and the overall front: the configurations no other configuration beats on both.
The metric is the test accuracy at the last round where the data set has a test split, else the
final objective. The fronts are :func:`fedsparse.query.pareto_front` over the configurations of
``fedsparse best --pareto total_bytes`` (grid runs and Optuna's held-out re-runs; a configuration
with a diverged run, or without a finite value, is left out). ``tables/pareto.csv`` holds every
configuration on its algorithm's front or the overall one.

At the final round, algorithms that send the same bytes per round over the same number of rounds
(Fed-HT and Distributed-IHT) sit in one column, and the front says nothing about them. So each
data set is also drawn per byte budget, from every evaluated round of every eligible
configuration: the best metric any configuration of an algorithm has reached once its runs have
sent that many bytes (mean over seeds, up + down), a staircase per algorithm and overall
(``budget_fronts``, ``tables/pareto_budget.csv``). That front separates methods that send the
same bytes per round but learn more from them.
"""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from ..errors import FedsparseError
from ..query import METRICS, Results, pareto_candidates, pareto_front
from ..query.read import sql_ident, sql_quote
from ..results.schema import HYPERPARAMETER_COLUMNS
from .analysis import Analysis, algorithm_order, label
from .data import ReportData, as_data, partitions_of
from .figures import MAX_WIDTH_IN, colour, plt

PAGE = "pareto.html"
COLUMN = "total_bytes"  # up + down: what a run costs in communication
# in order of preference: the first the data set has
PARETO_METRICS = ("final_test_accuracy", "final_objective")
_KEYS = ["dataset", "loss", "partition"]  # what sets a report section apart
_ENVIRONMENT = ["step_time", "round_latency", "exchange_time"]


NAMES = {"final_objective": "objective", "final_test_accuracy": "test accuracy"}


def title(df: pd.DataFrame) -> str:
    """The page's title, naming the metrics it plots ('Objective against communication')."""
    used = set(df["metric"]) if len(df) else set()
    names = [n for m, n in NAMES.items() if m in used] + sorted(used - set(NAMES)) or ["metric"]
    return f"{' and '.join(names).capitalize()} against communication"


def anchor(slug: str) -> str:
    """The id of a data set's front on the page (family pages link to PAGE#anchor)."""
    return f"front-{slug}"


def configurations(source: ReportData | str | Path, a: Analysis) -> pd.DataFrame:
    """Every configuration compared, in the sections with more than one algorithm: section,
    slug, metric (its name), value (mean metric), bytes (mean total bytes), eligible, front
    (overall) and algorithm_front, with its configuration columns. SQL on the build's
    connection (``fedsparse best --pareto``'s own queries)."""
    frames = []
    done: set[tuple] = set()
    data = as_data(source)
    res = Results(data.con, data.folders, [])
    for metric in PARETO_METRICS:
        if METRICS[metric][1] == "traces" and not _any_value(data, metric):
            continue  # no run has it (cheaper to know than the per-run values it would need)
        try:
            t = pareto_candidates(res, metric, COLUMN, by=["loss", "partition"])
        except FedsparseError:  # no run has this metric: the next one
            continue
        df = t.to_pandas().rename(columns={f"mean_{metric}": "value", f"mean_{COLUMN}": "bytes"})
        df["loss"] = df["loss"].fillna("unknown")  # as the report's sections name them
        df["partition"] = df["partition"].fillna("natural")
        keys = list(df[_KEYS].itertuples(index=False, name=None))
        df = df[[k not in done for k in keys]]  # a data set takes its first metric
        done |= set(keys)
        frames.append(df.assign(metric=metric))
    if not frames:
        return pd.DataFrame()
    df = pd.concat(frames, ignore_index=True)
    names = a.runs[[*_KEYS, "section"]].drop_duplicates()
    df = df.merge(names, on=_KEYS, how="inner")
    df = df.merge(a.sections[["section", "slug"]], on="section", how="left")
    several = df[df["eligible"]].groupby("section")["algorithm"].nunique()
    df = df[df["section"].isin(several[several > 1].index)].reset_index(drop=True)
    df["algorithm_front"] = False
    for _, g in df[df["eligible"]].groupby(["section", "algorithm"]):
        higher = METRICS[g["metric"].iloc[0]][0] == "higher"
        on = pareto_front(g["value"].to_numpy(), g["bytes"].to_numpy(), higher)
        df.loc[g.index[on], "algorithm_front"] = True
    return df


def budget_fronts(source: ReportData | str | Path, a: Analysis, df: pd.DataFrame) -> pd.DataFrame:
    """The best mean metric reached within each byte budget, per section and algorithm.

    Over every evaluated round of each section's valid configurations (no diverged run), mean
    over seeds per round; one SQL query per metric, returning the staircase's points only.

    Parameters
    ----------
    source
        The results read (a :class:`ReportData` or a results folder).
    a
        The report's analysis (its runs, and which configurations are valid).
    df
        The compared configurations (:func:`configurations`): their sections and each
        section's metric.

    Returns
    -------
    pandas.DataFrame
        Columns ``section, algorithm, metric, bytes, value`` (``algorithm`` also
        ``"overall"``): the points where the best value reached improves, cheapest first per
        section and algorithm. Empty, with those columns, when there is nothing to draw.
    """
    columns = ["section", "algorithm", "metric", "bytes", "value"]
    if df.empty:
        return pd.DataFrame(columns=columns)
    data = as_data(source)
    metric_of = df.drop_duplicates("section").set_index("section")["metric"]
    valid = a.configs.loc[a.configs["valid"], "config_id"]
    runs = a.runs[a.runs["section"].isin(metric_of.index) & a.runs["config_id"].isin(valid)]
    frames = []
    for metric in dict.fromkeys(metric_of):
        mine = runs[runs["section"].map(metric_of) == metric]
        if mine.empty:
            continue
        best = "max" if METRICS[metric][0] == "higher" else "min"
        col = f"t.{sql_ident(metric.removeprefix('final_'))}"
        frames.append(
            data.frame_with(
                f"""
                WITH per AS (  -- each configuration's mean over seeds, per round
                  SELECT k.section, k.algorithm, k.config_id, t.round,
                         avg({col}) FILTER (WHERE NOT isnan({col})) AS value,
                         avg(t.bytes_up + t.bytes_down) AS bytes
                  FROM traces t JOIN _keys k ON t.run_id = k.run_id
                  WHERE {partitions_of(mine)} GROUP BY ALL),
                pts AS (
                  SELECT section, algorithm, bytes, {best}(value) AS value FROM per
                  WHERE value IS NOT NULL AND bytes IS NOT NULL GROUP BY ALL
                  UNION ALL
                  SELECT section, 'overall', bytes, {best}(value) FROM per
                  WHERE value IS NOT NULL AND bytes IS NOT NULL GROUP BY ALL),
                stair AS (
                  SELECT *, {best}(value) OVER w AS reached FROM pts
                  WINDOW w AS (PARTITION BY section, algorithm ORDER BY bytes
                               ROWS UNBOUNDED PRECEDING)),
                steps AS (
                  SELECT *, lag(reached) OVER (PARTITION BY section, algorithm ORDER BY bytes)
                            AS before FROM stair)
                SELECT section, algorithm, {sql_quote(metric)} AS metric, bytes,
                       reached AS value
                FROM steps WHERE before IS NULL OR reached <> before
                ORDER BY section, algorithm, bytes""",
                _keys=mine[["run_id", "section", "algorithm", "config_id"]],
            )
        )
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True)[columns]


def _any_value(data: ReportData, metric: str) -> bool:
    """Whether some trace row has the value of a trace metric (final_test_accuracy: a
    test_accuracy): one streamed count, no per-run aggregation."""
    column = sql_ident(metric.removeprefix("final_"))
    return bool(data.arrow(f"SELECT count({column}) AS n FROM traces").column(0)[0].as_py())


def _setting(df: pd.DataFrame) -> pd.Series:
    """Each configuration's setting: the hyperparameters and environment that vary in its
    section ('k=100, exchange_time=10')."""
    cols = [c for c in [*HYPERPARAMETER_COLUMNS, *_ENVIRONMENT] if c in df]
    out = pd.Series("", index=df.index)
    for _, g in df.groupby("section"):
        vary = [c for c in cols if g[c].astype(str).nunique() > 1]
        out[g.index] = [
            ", ".join(f"{c}={_short(r[c])}" for c in vary if pd.notna(r[c]))
            for _, r in g.iterrows()
        ]
    return out


def _short(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def front_table(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of tables/pareto.csv: the configurations on a front, cheapest first."""
    on = df[df["front"] | df["algorithm_front"]].copy()
    on["setting"] = _setting(df).loc[on.index]
    cols = [
        "section",
        "algorithm",
        "setting",
        "metric",
        "value",
        "bytes",
        "seeds",
        "front",
        "algorithm_front",
        "grid_edges",
    ]
    hp = [c for c in [*HYPERPARAMETER_COLUMNS, *_ENVIRONMENT] if on[c].notna().any()]
    on = on.sort_values(["section", "bytes", "algorithm"])
    return on[cols + hp].rename(columns={"front": "overall_front"}).reset_index(drop=True)


def front_figure(df: pd.DataFrame, title: str, budget: pd.DataFrame | None = None):
    """One section's figure: the metric against bytes communicated.

    Parameters
    ----------
    df
        The section's configurations (:func:`configurations`), one metric.
    title
        The section's name.
    budget
        The section's rows of :func:`budget_fronts`; None or empty: the left panel is left out.

    Returns
    -------
    matplotlib.figure.Figure
        Left (with ``budget``), each algorithm's and the overall best metric within each byte
        budget; right, at the final round, every eligible configuration faint, each
        algorithm's front and the overall front.
    """
    metric = df["metric"].iloc[0]
    higher = METRICS[metric][0] == "higher"
    ok = df[df["eligible"]]
    algos = algorithm_order(ok["algorithm"].unique())
    colours = [colour(a) for a in algos]
    if len(set(colours)) < len(colours):  # the report's colours collide here: tab10 instead
        colours = [plt.get_cmap("tab10")(i % 10) for i in range(len(algos))]
    name = NAMES.get(metric, metric)
    better = "higher" if higher else "lower"
    panels = 2 if budget is not None and len(budget) else 1
    size = (MAX_WIDTH_IN, 4.6) if panels == 2 else (8.2, 4.8)  # at most the page's width
    fig, axes = plt.subplots(1, panels, figsize=size, constrained_layout=True, squeeze=False)
    if panels == 2:
        ax = axes[0][0]
        for algo, c in [*zip(algos, colours, strict=True), ("overall", "black")]:
            g = budget[(budget["algorithm"] == algo) & (budget["bytes"] > 0)]  # log axis
            overall = algo == "overall"
            ax.plot(
                g["bytes"],
                g["value"],
                color=c,
                lw=1.2 if overall else 1.4,
                ls="--" if overall else "-",
                label="overall" if overall else label(algo),
                drawstyle="steps-post",
            )
        ax.set_xscale("log")
        _log_if_spread(ax, budget["value"], higher)
        ax.set_xlabel("bytes sent so far, up + down (log)")
        ax.set_ylabel(f"best {name} reached ({better} is better)")
        ax.set_title("within a byte budget (every round, mean over seeds)", fontsize=9)
        ax.legend(fontsize=8, loc="best")
    ax = axes[0][-1]
    for algo, c in zip(algos, colours, strict=True):
        g = ok[ok["algorithm"] == algo]
        ax.scatter(g["bytes"], g["value"], color=c, alpha=0.25, s=16, lw=0)
        f = g[g["algorithm_front"]].sort_values(["bytes", "value"], ascending=[True, not higher])
        # a front is a staircase: from each point's bytes on, its value is attainable
        ax.plot(
            f["bytes"],
            f["value"],
            color=c,
            lw=1.4,
            marker="o",
            ms=4,
            label=label(algo),
            drawstyle="steps-post",
        )
    f = ok[ok["front"]].sort_values(["bytes", "value"], ascending=[True, not higher])
    ax.plot(
        f["bytes"],
        f["value"],
        color="black",
        lw=1.2,
        ls="--",
        marker="o",
        ms=9,
        mfc="none",
        label="overall front",
        drawstyle="steps-post",
    )
    ax.set_xscale("log")
    _log_if_spread(ax, ok["value"], higher)
    ax.set_xlabel("total bytes at the final round, up + down (log)")
    ax.set_ylabel(f"final {name} ({better} is better)")
    ax.set_title("at the final round (each configuration, mean over seeds)", fontsize=9)
    if panels == 1:
        ax.legend(fontsize=8, loc="best")
    fig.suptitle(f"{title}: {name} against bytes communicated", fontsize=10)
    return fig


def _log_if_spread(ax, values: pd.Series, higher: bool) -> None:
    v = values.to_numpy(dtype=float)
    if not higher and len(v) and (v > 0).all() and v.max() / v.min() > 10:
        ax.set_yscale("log")


def add_page(page, df: pd.DataFrame, tables: Path, budget: pd.DataFrame | None = None) -> None:
    """Write the Pareto page's text, one figure and table per section, and its tables.

    Parameters
    ----------
    page
        The report page appended to.
    df
        The compared configurations (:func:`configurations`).
    tables
        The folder ``pareto.csv`` (and ``pareto_budget.csv``) are written to.
    budget
        The :func:`budget_fronts` rows; None: no budget panels or table.
    """
    table = front_table(df)
    table.to_csv(tables / "pareto.csv", index=False)
    if budget is not None:
        budget.to_csv(tables / "pareto_budget.csv", index=False)
    page.text(
        "p",
        "Left: the best metric each algorithm has reached once its runs have sent a given "
        "number of bytes, over every evaluated round of every configuration without a diverged "
        "run (mean over seeds; tables/pareto_budget.csv). It separates algorithms that send the "
        "same bytes per round, which the final round cannot. Right, at the final round: "
        "each point is a configuration (mean over its seeds) of one data set: its metric against "
        "the bytes its runs sent up and down (the cloud link for hierarchical methods). The "
        "coloured lines join each algorithm's front, the dashed line the overall front: the "
        "configurations no other configuration beats on both the metric and the bytes (equal "
        "on both: all kept). A configuration with a diverged run is left out, as are runs of "
        "Optuna trials (their held-out re-runs count). The same fronts: fedsparse best --pareto "
        "total_bytes --metric METRIC --by loss,partition; table: tables/pareto.csv.",
        "muted",
    )
    for section, g in df.groupby("section", sort=True):
        slug = g["slug"].iloc[0]
        page.heading("h2", section, anchor(slug))
        out = int((~g["eligible"]).sum())
        page.text(
            "p",
            f"{int(g['eligible'].sum())} configurations of {g['algorithm'].nunique()} algorithms"
            + (f"; {out} more left out (a diverged run, or no finite value)" if out else "")
            + ".",
            "muted",
        )
        mine = None if budget is None else budget[budget["section"] == section]
        page.figure(front_figure(g, section, mine), f"pareto_{slug}", f"front, {section}")
        rows = table[(table["section"] == section) & table["overall_front"]]
        metric = g["metric"].iloc[0]
        shown = rows[["algorithm", "setting", "value", "bytes", "seeds", "grid_edges"]].rename(
            columns={"value": f"mean {metric}", "bytes": "mean total bytes"}
        )
        page.text("h3", "The overall front, cheapest first")
        page.table(shown, {"mean total bytes": lambda v: f"{v:.4g}"})


def link(slugs: list[str], sections: list[str]) -> str:
    """The paragraph a family page ends with: its data sets' fronts."""
    items = ", ".join(
        f'<a href="{PAGE}#{html.escape(anchor(s))}">{html.escape(n)}</a>'
        for s, n in zip(slugs, sections, strict=True)
    )
    return (
        '<p class="muted">The metric against communication: every configuration of these '
        f"runs with the fronts of each algorithm and overall, on {items}.</p>"
    )


def sections_of(df: pd.DataFrame, algorithms: frozenset[str]) -> tuple[list[str], list[str]]:
    """The (slugs, sections) with a front that holds runs of ``algorithms``."""
    hit = df[df["algorithm"].isin(algorithms)].drop_duplicates("section").sort_values("section")
    return hit["slug"].tolist(), hit["section"].tolist()


__all__ = [
    "PAGE",
    "add_page",
    "anchor",
    "budget_fronts",
    "configurations",
    "front_figure",
    "link",
    "sections_of",
    "title",
]
