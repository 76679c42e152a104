"""The algorithm registry: built-in families and plugins (entry points in the group
fedsparse.algorithms), and everything derived from the classes' declarations."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import SMALL_LINEAR

from fedsparse.algorithms import ALGORITHMS, registry
from fedsparse.errors import FedsparseError
from fedsparse.results import schema

ROOT = Path(__file__).resolve().parents[1]

# The built-in results columns, "name:type" in order, as docs/gen_reference.py writes them from
# the declarations. A pinned column renamed, retyped, removed or moved is a breaking change (the
# results folders written before no longer read): the script refuses to write such a pin at one
# schema version. A column added is not, but the pin is stale until the script is rerun.
PINNED_SCHEMA = ROOT / "tests" / "pinned_schema.json"
REGENERATE = "run python docs/gen_reference.py"


def gen_reference():
    """docs/gen_reference.py as a module (it is a script)."""
    spec = importlib.util.spec_from_file_location(
        "gen_reference", ROOT / "docs" / "gen_reference.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pin() -> dict:
    return json.loads(PINNED_SCHEMA.read_text())


def pinned(key: str) -> list[tuple[str, pa.DataType]]:
    return [(c.split(":")[0], pa.type_for_alias(c.split(":")[1])) for c in pin()[key]]


def columns(schema: pa.Schema) -> list[tuple[str, pa.DataType]]:
    return [(f.name, f.type) for f in schema]


def test_the_built_in_schemas_derived_from_the_classes_are_the_pinned_ones():
    builtin = schema.schemas_of(registry.classes(plugins=False).values())
    now = {
        "schema_version": schema.SCHEMA_VERSION,
        "hyperparameters": list(builtin.hyperparameters),
        "trace": [f"{f.name}:{f.type}" for f in builtin.trace],
        "runs": [f"{f.name}:{f.type}" for f in builtin.runs],
    }
    pinned_now = pin()
    breaks = gen_reference().pin_breaks(pinned_now, now)
    assert not breaks, (
        f"breaking change to the results schema: {'; '.join(breaks)} (results folders written "
        f"before no longer read): keep them, or raise fedsparse.results.schema.SCHEMA_VERSION and "
        f"{REGENERATE}"
    )
    stale = [k for k, v in now.items() if pinned_now[k] != v]
    assert not stale, f"tests/pinned_schema.json is out of date ({', '.join(stale)}): {REGENERATE}"
    hps = now["hyperparameters"]
    assert hps[0] == "stepsize" and columns(builtin.trace)[11][0] == "stepsize"
    version = str(schema.SCHEMA_VERSION).encode()
    assert builtin.trace.metadata == {b"fedsparse_trace_schema": version}
    assert builtin.runs.metadata == {b"fedsparse_runs_schema": version}
    # no plugin in this process: the module's schemas are these
    assert schema.TRACE_SCHEMA.equals(builtin.trace, check_metadata=True)
    assert schema.RUNS_SCHEMA.equals(builtin.runs, check_metadata=True)
    assert schema.CONFIG_COLUMNS[-len(hps) :] == schema.HYPERPARAMETER_COLUMNS == tuple(hps)


def test_the_registry_lists_the_built_in_families_in_the_papers_order():
    assert list(ALGORITHMS) == [
        "fedht",
        "fediterht",
        "distiht",
        "sfedhp",
        "pfedme",
        "hierfavg",
        "fedprox",
        "perfedavg",
        "heurfedamp",
        "fabtopk",
        "utopk",
        "fubtopk",
        "periodick",
        "sendall",
        "ssca",
        "ssca_constrained",
        "fedavg",
    ]
    pages = [p.rsplit(".", 1)[-1] for p in registry.report_pages()]
    assert pages == ["report"] * 4
    from fedsparse.report import FAMILIES
    from fedsparse.report.analysis import LABELS, algorithm_order
    from fedsparse.report.figures import colour

    assert [f.key for f in FAMILIES] == ["ht", "sfedhp", "gs", "ssca"]
    assert LABELS == {"fedht": "Fed-HT", "fediterht": "FedIter-HT", "distiht": "Distributed-IHT"}
    # declared report_order first (Distributed-IHT, the baseline, leads), the others by name
    mixed = ["zeta", "fedavg", "fediterht", "fedht", "distiht", "ssca"]
    assert algorithm_order(mixed) == ["distiht", "fedht", "fediterht", "fedavg", "ssca", "zeta"]
    assert [colour(a) for a in ("fedht", "fediterht", "distiht")] == [
        "tab:blue",
        "tab:orange",
        "tab:green",
    ]
    from fedsparse.algorithms import SSCA, FedHT

    assert ALGORITHMS["ssca"] is SSCA and ALGORITHMS["fedht"] is FedHT


def test_the_report_s_labels_colours_and_symbols_are_the_declarations(monkeypatch):
    import pandas as pd

    from fedsparse.families.sfedhp import analysis as sfedhp_analysis
    from fedsparse.families.sfedhp import figures as sfedhp_figures
    from fedsparse.report import analysis
    from fedsparse.report.figures import colour

    def row(**values):
        base = {"stepsize": 0.01, "local_steps": 5, "sparsity": 40, "batch_size": 10}
        return pd.Series({**base, **values})

    # a built-in's config_label: its hyperparameters in its order, growth only off its default
    assert analysis.config_label(row(batch_growth=1.0), "fedht") == "γ=0.01, K=5, τ=40, b=10"
    grown = analysis.config_label(row(batch_growth=1.5), "fedht")
    assert grown == "γ=0.01, K=5, τ=40, b=10, growth=1.5"
    full = row(batch_size=None, lambda1=20.0, local_steps=None)
    assert analysis.config_label(full, "sfedhp") == "γ=0.01, b=full"
    # a family without config_label (a plugin's, or a new built-in one): every declared one
    toy = toy_class(
        hyperparameters=(
            registry_hp("stepsize", float),
            registry_hp("toy_scale", float, symbol="s"),
        )
    )
    monkeypatch.setitem(ALGORITHMS, "toygd", toy)
    toy_row = pd.Series({"stepsize": 0.5, "toy_scale": 2.0})
    assert analysis.config_label(toy_row, "toygd") == "stepsize=0.5, s=2"
    # the sFedHP page names and draws its methods as they declare; the shared pages by name
    assert [sfedhp_analysis.method_name(a) for a in ("sfedhp", "fedavg", "heurfedamp")] == [
        "sFedHP",
        "FedAvg",
        "HeurFedAMP",
    ]
    assert sfedhp_figures.method_colour("pfedme") == ALGORITHMS["pfedme"].colour == "tab:blue"
    assert analysis.label("sfedhp") == "sfedhp" and colour("sfedhp") != "tab:red"
    assert analysis.symbol("fedht", "stepsize") == "γ" and analysis.symbol("sfedhp", "rho") == "ρ"


def registry_hp(name: str, kind: type, **extra):
    from fedsparse.algorithms import Hyperparameter

    return Hyperparameter(name, kind, name, default=kind(1), **extra)


class FakeEntryPoint:
    def __init__(self, name: str, value: str, obj=None, error: Exception | None = None):
        self.name, self.value, self.obj, self.error = name, value, obj, error

    def load(self):
        if self.error is not None:
            raise self.error
        return self.obj


def toy_class(name: str = "toygd", **extra):
    from fedsparse.algorithms import Algorithm, Column, Hyperparameter

    attrs = {
        "name": name,
        "summary": "a toy",
        "hyperparameters": (
            Hyperparameter("stepsize", float, "step", low=0.0, low_open=True),
            Hyperparameter("toy_scale", float, "a factor", default=1.0),
        ),
        "trace_columns": (Column("toy_norm", float, "||w||"),),
        "setup": lambda self: None,
        "round": lambda self, t: None,
        "model": None,
        **extra,
    }
    return type("Toy", (Algorithm,), attrs)


def test_a_name_collision_is_one_line_naming_both():
    ep = FakeEntryPoint("mine", "mine.algos:Toy", toy_class("fedht"))
    with pytest.raises(FedsparseError) as err:
        registry._load([ep])
    msg = str(err.value)
    assert "\n" not in msg and "'fedht'" in msg
    assert (
        "fedsparse.families.hard_thresholding.algorithms.FedHT" in msg and "entry point mine" in msg
    )


def test_a_broken_or_wrong_plugin_is_one_line_naming_it():
    broken = FakeEntryPoint("bad", "bad.mod", error=ImportError("no module named bad\nat all"))
    with pytest.raises(FedsparseError, match=r"^entry point bad \(bad.mod\) in group") as err:
        registry._load([broken])
    assert "\n" not in str(err.value)
    with pytest.raises(FedsparseError, match="neither an algorithm class nor a module"):
        registry._load([FakeEntryPoint("odd", "odd", object())])


def test_a_plugin_s_columns_go_after_every_built_in_one(tmp_path):
    toy = toy_class(colour="tab:pink")
    builtin = registry.classes(plugins=False)
    both = schema.schemas_of([*builtin.values(), toy])
    assert columns(both.trace) == [
        *pinned("trace"),
        ("toy_scale", pa.float64()),
        ("toy_norm", pa.float64()),
    ]
    assert columns(both.runs) == [*pinned("runs"), ("toy_scale", pa.float64())]
    assert both.hyperparameters[-1] == "toy_scale"
    # a shard written without the plugin reads with its columns null (as aggregate reads it)
    old = schema.rows_table([{"run_id": "a", "round": 0, "objective": 1.0}], schema.TRACE_SCHEMA)
    path = tmp_path / "old.parquet"
    pq.write_table(old, path)
    read = pq.read_table(path, schema=both.trace)
    assert read.column("toy_norm").null_count == 1 and read.column("objective")[0].as_py() == 1.0
    # and a plugin declaring what the built-ins declare adds nothing
    same = toy_class(hyperparameters=(toy.hyperparameters[0],), trace_columns=())
    assert schema.schemas_of([*builtin.values(), same]).trace.equals(
        schema.schemas_of(builtin.values()).trace
    )
    from fedsparse.algorithms import Column, Hyperparameter

    bad = toy_class(hyperparameters=(Hyperparameter("k", str, "k as text", default="a"),))
    with pytest.raises(FedsparseError, match=r"^toygd.k: declared str, but fabtopk declares k"):
        schema.schemas_of([*builtin.values(), bad])
    bad = toy_class(trace_columns=(Column("round", float, "a float round"),))
    with pytest.raises(FedsparseError, match="trace column round is a results column"):
        schema.schemas_of([*builtin.values(), bad])
    bad = toy_class(hyperparameters=(Hyperparameter("time", float, "t", default=1.0),))
    with pytest.raises(FedsparseError, match="hyperparameter time is a results column"):
        schema.schemas_of([*builtin.values(), bad])


def test_reading_the_registry_is_lazy():
    code = (
        "import sys, fedsparse.results.schema, fedsparse.algorithms\n"
        "import fedsparse.algorithms.registry\n"
        "print(' '.join(m for m in ('numba', 'fedsparse.kernels', 'fedsparse.algorithms.base')"
        " if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


# ---------------------------------------------------------------------------- a plugin, for real

DOC = ROOT / "docs" / "adding-an-algorithm.md"


def doc_family() -> tuple[dict[str, str], dict[str, str]]:
    """The family docs/adding-an-algorithm.md builds, as written there: its files (every python
    block opening with a ``# toy_fedsparse/...`` path) and its entry points (the toml block)."""
    import tomllib

    text = DOC.read_text()
    files = dict(re.findall(r"```python\n# (toy_fedsparse/\S+\.py)\n(.*?)```", text, re.S))
    (toml,) = re.findall(r"```toml\n(.*?)```", text, re.S)
    points = tomllib.loads(toml)["project"]["entry-points"][registry.GROUP]
    return files, points


def doc_tests() -> dict[str, str]:
    """The toy family's tests as docs/adding-an-algorithm.md writes them (every python block
    opening with a ``# tests/...`` path)."""
    return dict(re.findall(r"```python\n# (tests/\S+\.py)\n(.*?)```", DOC.read_text(), re.S))


def install_toy(folder: Path) -> Path:
    """The docs' toy family as an installed distribution would be: its package and a
    *.dist-info with its entry point, both on the path ``folder`` (what pip install puts in
    site-packages)."""
    files, points = doc_family()
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    info = folder / "toy_fedsparse-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-fedsparse\nVersion: 0.1\n")
    lines = "".join(f"{name} = {value}\n" for name, value in points.items())
    (info / "entry_points.txt").write_text(f"[{registry.GROUP}]\n{lines}")
    return folder


def test_the_docs_family_is_one_folder_with_the_files_the_page_names():
    files, points = doc_family()
    assert sorted(files) == [
        "toy_fedsparse/__init__.py",
        "toy_fedsparse/algorithms.py",
        "toy_fedsparse/report.py",
    ]
    assert points == {"toy": "toy_fedsparse"}
    assert list(doc_tests()) == ["tests/test_toy.py"]  # its tests, run by the test below


@pytest.mark.integration
def test_a_plugin_family_sweeps_resumes_lands_typed_and_is_reported(tmp_path):
    plugin = install_toy(tmp_path / "site")
    path = os.pathsep.join([str(plugin), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    work = tmp_path / "work"
    work.mkdir()
    sweep = {
        "sweep": "plugin",
        "rounds": 6,
        "seeds": [0],
        "datasets": {"lin": {"data": dict(SMALL_LINEAR)}},
        "algorithms": {"toygd": {"toy_scale": [1.0, 0.5], "toy_mode": "halved"}, "fedht": {}},
        "grid": {"stepsize": [0.01], "sparsity": [10], "local_steps": [2], "batch_size": [5]},
    }
    (work / "sweep.yaml").write_text(yaml.safe_dump(sweep))
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(ROOT / "Snakefile"),
        "--directory",
        str(work),
        "--cores",
        "2",
        "--configfile",
        str(work / "sweep.yaml"),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]

    res = work / "results/plugin"  # results/<sweep>
    runs = pq.read_table(res / "runs.parquet")
    assert columns(runs.schema)[-3:] == [
        ("toy_scale", pa.float64()),
        ("toy_mode", pa.string()),
        ("toy_repeats", pa.int64()),
    ]
    assert columns(runs.schema)[: len(pinned("runs"))] == pinned("runs")
    rows = runs.to_pandas().sort_values(["algorithm", "toy_scale"])
    assert rows["algorithm"].tolist() == ["fedht", "toygd", "toygd"]
    assert rows["toy_scale"].tolist()[1:] == [0.5, 1.0] and rows["toy_mode"].iloc[1] == "halved"
    assert rows["toy_repeats"].iloc[1:].tolist() == [1, 1] and pd_isna(rows["toy_scale"].iloc[0])
    assert (rows["status"] == "ok").all()
    traces = pq.read_table(res / "traces").to_pandas()
    toy = traces[traces["algorithm"] == "toygd"]
    assert len(toy) == 2 * 7 and toy["toy_norm"].notna().all()
    assert traces.loc[traces["algorithm"] == "fedht", "toy_norm"].isna().all()
    assert toy.groupby("run_id")["objective"].apply(lambda o: o.iloc[-1] < o.iloc[0]).all()

    report = res / "report"
    assert "Toy-GD" in (report / "runs.html").read_text()
    summary = (report / "tables" / "summary.csv").read_text()  # labelled by its declarations
    assert "stepsize=0.01, s=1, toy_mode=halved, toy_repeats=1" in summary
    assert "Toy-GD page: 2 toy runs" in (report / "toy.html").read_text()
    assert 'href="toy.html"' in (report / "index.html").read_text()

    # the page's tests of the family (fedsparse.testing's checks), on the installed plugin
    (tests_file,) = doc_tests()
    (work / tests_file).parent.mkdir(parents=True)
    (work / tests_file).write_text(doc_tests()[tests_file])
    check = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", tests_file]
    tested = subprocess.run(check, capture_output=True, text=True, env=env, cwd=work, timeout=600)
    assert tested.returncode == 0 and "2 passed" in tested.stdout, tested.stdout[-3000:]

    # resuming: nothing left to do
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "Nothing to be done" in again.stdout + again.stderr

    # without the plugin (this process): the results still read, its columns left out
    from fedsparse.query.read import read_results

    table = read_results([res], "SELECT algorithm, count(*) AS n FROM runs GROUP BY 1")
    assert dict(zip(*table.to_pydict().values(), strict=True)) == {"fedht": 1, "toygd": 2}


def pd_isna(value) -> bool:
    import pandas as pd

    return bool(pd.isna(value))


def test_every_builtin_family_folder_is_registered_by_one_entry_point():
    # A built-in family is one folder plus its line in pyproject.toml, and is loaded through
    # that entry point as a plugin's family is.
    import tomllib

    root = Path(__file__).resolve().parents[1]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    points = project["entry-points"][registry.GROUP]
    folders = sorted(
        p.name for p in (root / "src/fedsparse/families").iterdir() if (p / "__init__.py").exists()
    )
    assert sorted(points) == folders
    assert all(value == f"fedsparse.families.{name}" for name, value in points.items())
    loaded = [f for f in registry.families(plugins=False)]
    assert all(f.builtin and f.source.startswith("entry point ") for f in loaded)
    assert sorted(f.module.rsplit(".", 1)[-1] for f in loaded) == folders


def test_a_family_s_baselines_from_other_families_are_registered_algorithms():
    """A page compares with other families' algorithms only through its declared BASELINES,
    and each names an algorithm of another family."""
    import importlib

    folders = sorted((ROOT / "src" / "fedsparse" / "families").glob("*/analysis.py"))
    declared = 0
    for path in folders:
        module = importlib.import_module(f"fedsparse.families.{path.parent.name}.analysis")
        own = {
            cls.name
            for family in registry.families(plugins=False)
            if family.module.split(".")[2] == path.parent.name
            for cls in family.algorithms
        }
        for name in getattr(module, "BASELINES", ()):
            declared += 1
            assert name in ALGORITHMS and name not in own, (path.parent.name, name)
    assert declared >= 3  # sFedHP's, gradient sparsification's and SSCA's FedAvg
