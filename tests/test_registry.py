"""The algorithm registry: built-in families and plugins (entry points in the group
fedsparse.algorithms), and everything derived from the classes' declarations."""

from __future__ import annotations

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

from fedsparse import results
from fedsparse.algorithms import ALGORITHMS, registry
from fedsparse.errors import FedsparseError

ROOT = Path(__file__).resolve().parents[1]

# Schema version 3 as it was written by hand before the registry (name:type, s string,
# i int64, d double): the columns, their types and positions are a contract.
IDENTITY_AND_HYPERPARAMETERS_V3 = """
    run_id:s sweep:s dataset:s partition:s algorithm:s loss:s model:s seed:i step_time:d
    round_latency:d exchange_time:d stepsize:d local_steps:i sparsity:i batch_size:i
    batch_growth:d threshold:s k:i fill:s k_control:s k_sequence:s k_min:i k_max:i
    window:i expand:d sampled_clients:i stepsize_decay:d prox_weight:d rho_scale:d
    gamma_scale:d decay:d gamma_extra:d lambda:d cost_limit:d penalty:d inner_stepsize:d
    inner_steps:i edge_rounds:i lambda1:d lambda2:d gamma1:d gamma2:d rho:d beta:d edges:i
    sampled_edges:i anchor:s gamma_tiny:d density_floor:d gamma2_rounds:i zero_tol:d mu:d
    variant:s hvp_delta:d alpha_self:d sigma:d
"""
TRACE_ONLY_V3 = """
    round:i local_iterations:i objective:d
    bytes_up:i bytes_down:i elapsed_s:d status:s nnz:i train_accuracy:d
    support_precision:d support_recall:d dist_to_truth:d study:s trial_number:i
    trial_state:s sampler:s test_accuracy:d train_loss:d pm_objective:d
    pm_train_accuracy:d pm_test_accuracy:d slack:d constraint_value:d sq_norm:d time:d
    k_used:i k_aux:i sign:i min_shared:i idle_clients:i edge_bytes_up:i edge_bytes_down:i
    bits:d density:d pm_density:d
"""
RUNS_ONLY_V3 = """
    rounds:i eval_every:i dataset_kind:s
    dataset_task:s data_alpha:d data_beta:d status:s final_round:i final_objective:d
    best_objective:d train_time_s:d wall_time_s:d total_bytes_up:i total_bytes_down:i
    total_time:d config_json:s client_summary:s shard:s fedsparse_version:s git_commit:s
    python_version:s numpy_version:s numba_version:s host:s finished_at:s study:s
    trial_number:i trial_state:s sampler:s trial_value:d search_space:s trial_values:s
"""
TRACE_V3 = IDENTITY_AND_HYPERPARAMETERS_V3 + TRACE_ONLY_V3
RUNS_V3 = IDENTITY_AND_HYPERPARAMETERS_V3 + RUNS_ONLY_V3
TYPES = {"s": pa.string(), "i": pa.int64(), "d": pa.float64()}


def pinned(text: str) -> list[tuple[str, pa.DataType]]:
    return [(c.split(":")[0], TYPES[c.split(":")[1]]) for c in text.split()]


def columns(schema: pa.Schema) -> list[tuple[str, pa.DataType]]:
    return [(f.name, f.type) for f in schema]


def test_the_built_in_schemas_derived_from_the_classes_are_schema_version_3():
    builtin = results.schemas_of(registry.classes(plugins=False).values())
    assert columns(builtin.trace) == pinned(TRACE_V3)
    assert columns(builtin.runs) == pinned(RUNS_V3)
    hps = [n for n, _ in pinned(TRACE_V3)[11 : 11 + 45]]
    assert list(builtin.hyperparameters) == hps and hps[0] == "stepsize" and hps[-1] == "sigma"
    assert builtin.trace.metadata == {b"fedsparse_trace_schema": b"3"}
    assert builtin.runs.metadata == {b"fedsparse_runs_schema": b"3"}
    # no plugin in this process: the module's schemas are these
    assert results.TRACE_SCHEMA.equals(builtin.trace, check_metadata=True)
    assert results.RUNS_SCHEMA.equals(builtin.runs, check_metadata=True)
    assert results.CONFIG_COLUMNS[-45:] == results.HYPERPARAMETER_COLUMNS == tuple(hps)


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
    both = results.schemas_of([*builtin.values(), toy])
    assert columns(both.trace) == [
        *pinned(TRACE_V3),
        ("toy_scale", pa.float64()),
        ("toy_norm", pa.float64()),
    ]
    assert columns(both.runs) == [*pinned(RUNS_V3), ("toy_scale", pa.float64())]
    assert both.hyperparameters[-1] == "toy_scale"
    # a shard written without the plugin reads with its columns null (as aggregate reads it)
    old = results.rows_table([{"run_id": "a", "round": 0, "objective": 1.0}], results.TRACE_SCHEMA)
    path = tmp_path / "old.parquet"
    pq.write_table(old, path)
    read = pq.read_table(path, schema=both.trace)
    assert read.column("toy_norm").null_count == 1 and read.column("objective")[0].as_py() == 1.0
    # and a plugin declaring what the built-ins declare adds nothing
    same = toy_class(hyperparameters=(toy.hyperparameters[0],), trace_columns=())
    assert results.schemas_of([*builtin.values(), same]).trace.equals(
        results.schemas_of(builtin.values()).trace
    )
    from fedsparse.algorithms import Column, Hyperparameter

    bad = toy_class(hyperparameters=(Hyperparameter("k", str, "k as text", default="a"),))
    with pytest.raises(FedsparseError, match=r"^toygd.k: declared str, but fabtopk declares k"):
        results.schemas_of([*builtin.values(), bad])
    bad = toy_class(trace_columns=(Column("round", float, "a float round"),))
    with pytest.raises(FedsparseError, match="trace column round is a results column"):
        results.schemas_of([*builtin.values(), bad])
    bad = toy_class(hyperparameters=(Hyperparameter("time", float, "t", default=1.0),))
    with pytest.raises(FedsparseError, match="hyperparameter time is a results column"):
        results.schemas_of([*builtin.values(), bad])


def test_reading_the_registry_is_lazy():
    code = (
        "import sys, fedsparse.results, fedsparse.algorithms, fedsparse.algorithms.registry\n"
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


@pytest.mark.slow
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

    res = work / "results"
    runs = pq.read_table(res / "runs.parquet")
    assert columns(runs.schema)[-3:] == [
        ("toy_scale", pa.float64()),
        ("toy_mode", pa.string()),
        ("toy_repeats", pa.int64()),
    ]
    assert columns(runs.schema)[: len(pinned(RUNS_V3))] == pinned(RUNS_V3)
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

    # resuming: nothing left to do
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "Nothing to be done" in again.stdout + again.stderr

    # without the plugin (this process): the results still read, its columns left out
    table = results.read_results([res], "SELECT algorithm, count(*) AS n FROM runs GROUP BY 1")
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
