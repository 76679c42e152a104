"""The package's import graph: no cycles, no module imports another's private names, and each
layer imports only the layers below it (LAYERS; the families have tests of their own)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "fedsparse"


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: dict[str, Path]):
    """(module imported, name imported or None) of every import in ``path``, also the ones
    inside functions: a module imported lazily is still a dependency."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from ((a.name, None) for a in node.names if a.name.startswith("fedsparse"))
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            target = ".".join(base + [node.module] if node.module else base)
            if node.level == 0:
                target = node.module or ""
            if not target.startswith("fedsparse"):
                continue
            for a in node.names:
                sub = f"{target}.{a.name}"
                yield (sub, None) if sub in known else (target, a.name)
        elif isinstance(node, ast.Call) and _called(node) in ("LazyModule", "lazy_names"):
            # fedsparse.lazy's deferred imports: their module names, written out in full
            for text in ast.walk(node):
                if isinstance(text, ast.Constant) and str(text.value).startswith("fedsparse."):
                    yield text.value, None


def _called(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def graph() -> dict[str, set[str]]:
    """Module -> modules it runs when imported (a submodule also runs its packages)."""
    known = modules()
    out = {m: set() for m in known}
    for m, path in known.items():
        for target, _ in imports(m, path, known):
            parts = target.split(".")
            for k in range(1, len(parts) + 1):
                dep = ".".join(parts[:k])
                if dep in known and dep != m and not m.startswith(dep + "."):
                    out[m].add(dep)
    return out


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    g = graph()
    assert g["fedsparse.sweep"] and g["fedsparse.tune"]  # the graph is really built
    # deferred imports are edges too (fedsparse.lazy)
    assert "fedsparse.training.experiment" in g["fedsparse"]
    assert "fedsparse.kernels" in g["fedsparse.families.fedavg.algorithms"]
    assert cycles(g) == []


def test_no_module_imports_private_names_of_another():
    known = modules()
    private = {
        (m, target, name)
        for m, path in known.items()
        for target, name in imports(m, path, known)
        if name and name.startswith("_") and not name.startswith("__") and target != m
    }
    assert private == set()


# The package's layers, lowest first (docs/architecture.md draws them): a module imports only
# modules of its own layer and of the layers before it. An entry names a module and everything
# under it; the most specific entry decides, and ``<package>.__init__`` names a package's own
# module alone. The families are the tests' below: they are loaded through the registry only,
# and a family's page stands above the report.
LAYERS = (
    ("base", "errors values atomic defaults layout lazy wording plugins threads work"),
    ("kernels", "kernels"),
    ("data", "data"),
    ("the objective", "objective"),
    ("algorithms", "algorithms"),
    ("results", "results"),
    ("reading results", "query"),
    ("one run", "training"),
    ("the sweep", "sweep"),
    ("the workflow's jobs", "pipeline"),
    ("Optuna studies", "tune"),
    ("report", "report"),
    ("front door", "__init__ __main__ cli testing"),
)
RANK = {entry: rank for rank, (_, entries) in enumerate(LAYERS) for entry in entries.split()}


def layer(module: str, packages: set[str]) -> int | None:
    """The rank in LAYERS of ``module`` (a full dotted name), None if no entry covers it."""
    parts = module.split(".")[1:]
    if module in packages and ".".join([*parts, "__init__"]) in RANK:
        return RANK[".".join([*parts, "__init__"])]
    for k in range(len(parts), 0, -1):
        if ".".join(parts[:k]) in RANK:
            return RANK[".".join(parts[:k])]
    return None


def test_each_layer_imports_only_the_layers_below_it():
    known = modules()
    packages = {m for m, path in known.items() if path.name == "__init__.py"}
    g = graph()
    ours = [m for m in g if not m.startswith("fedsparse.families")]
    assert [m for m in ours if layer(m, packages) is None] == []  # every module has its layer
    upward = {
        (m, d)
        for m in ours
        for d in g[m]
        if not d.startswith("fedsparse.families") and layer(d, packages) > layer(m, packages)
    }
    assert upward == set()


def test_reading_the_plan_imports_no_kernels(tmp_path):
    # What a cluster job's own Snakemake does (workflow/rules/common.smk, run.smk): import the
    # planner, read the plan file, find its shard's data set, run ids, priority and resources.
    # The kernels (numba, scipy) and the algorithms cost ~0.7 s and ~80 MB of its start-up.
    import subprocess
    import sys

    import yaml

    from fedsparse.layout import Layout
    from fedsparse.sweep import plan_sweep
    from fedsparse.sweep.plan_file import write_plan_file

    root = Path(__file__).resolve().parents[1]
    sweep = yaml.safe_load((root / "config/quick.yaml").read_text())
    plan = plan_sweep(sweep)
    write_plan_file(plan, sweep, Layout(tmp_path).plan_file)
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(sweep))
    code = f"""
import sys, yaml
from fedsparse.pipeline.progress import sweep_progress
from fedsparse.layout import Layout
from fedsparse.sweep.plan_file import plan_from_file
sweep = yaml.safe_load(open({str(tmp_path / "sweep.yaml")!r}))
plan = plan_from_file(Layout({str(tmp_path)!r}).plan_file, sweep)
shard = list(plan.shards)[-1]
assert plan.shard_dataset(shard) and [r.run_id for r in plan.shards[shard]]
assert plan.shard_priority(shard) > 0 and plan.shard_resources(shard, "no-data")["runtime"] > 0
sweep_progress(plan, sweep, {str(tmp_path)!r}, print)
heavy = ("numba", "scipy", "fedsparse.algorithms", "fedsparse.kernels")
heavy += ("fedsparse.training.experiment",)
print(" ".join(m for m in heavy if m in sys.modules))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


# A family's modules that a run loads (what the registry imports, and the kernels).
RUN_MODULES = ("algorithms", "controllers", "kernels")
PAGE_MODULES = ("report", "analysis", "figures")  # a family's page and what only it uses


def test_a_family_imports_only_the_layers_below_it():
    # A family's algorithms and kernels read shared declarations from algorithms.base and
    # algorithms.common, never another family, and nothing above them: no results or config
    # reading. Its report page may use the report layer, and a replay module (gradient
    # sparsification's recorded k sequences, read by its Algorithm hooks when they are called)
    # the results; no family imports another.
    below = {
        "fedsparse.algorithms",  # the package of base and common: light, loads no family
        "fedsparse.algorithms.base",
        "fedsparse.algorithms.common",
        "fedsparse.defaults",
        "fedsparse.errors",
        "fedsparse.families",
        "fedsparse.kernels",
        "fedsparse.lazy",
        "fedsparse.objective",  # the package: light, imports none of its modules
        "fedsparse.objective.problem",
    }
    g = graph()
    families = [m for m in g if m.startswith("fedsparse.families.") and m.count(".") == 2]
    assert len(families) >= 5
    for family in families:
        own = {m for m in g if m == family or m.startswith(family + ".")}
        for m in own:
            others = {d for d in g[m] if d.startswith("fedsparse.families.") and d not in own}
            assert others == set(), m
            if m != family and m.rpartition(".")[2] not in RUN_MODULES:
                continue  # its page, analysis and figures, its replay reader: above the runs
            # not its page (a run never loads matplotlib); its replay reader, through the
            # hooks called where a config is normalised
            runs_own = {d for d in own if d.rpartition(".")[2] not in PAGE_MODULES}
            above = g[m] - runs_own - below
            above = {d for d in above if not d.startswith("fedsparse.kernels.")}
            assert above == set(), m


def test_nothing_outside_a_family_folder_imports_it():
    # Families load through the registry's entry points, as a plugin's do.
    g = graph()
    for m, deps in g.items():
        if m.startswith("fedsparse.families."):
            continue
        assert {d for d in deps if d.startswith("fedsparse.families.")} == set(), m


def test_one_idiom_defers_imports():
    # fedsparse.lazy is the one way to defer an import: no module spells its own
    # module-level __getattr__ or imports by a computed name
    for m, path in modules().items():
        tree = ast.parse(path.read_text())
        own = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
        assert "__getattr__" not in own or m == "fedsparse.lazy", m
        if m != "fedsparse.lazy":
            assert "importlib.import_module" not in path.read_text(), m


def test_the_results_schema_imports_no_kernels():
    # fedsparse query, best and merge build the results schema from the algorithm classes'
    # declarations; the families name their kernels lazily (algorithms.common.LazyModule), so
    # numba, SciPy and the kernels (~0.7 s) load only when a run calls one.
    import subprocess
    import sys

    code = """
import sys
import fedsparse.results.schema as r
from fedsparse.algorithms import ALGORITHMS
assert r.RUNS_SCHEMA and r.TRACE_SCHEMA and len(ALGORITHMS) > 10
heavy = ("numba", "scipy", "fedsparse.kernels", "fedsparse.objective.problem")
print(" ".join(m for m in heavy if m in sys.modules))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_no_source_file_tells_history():
    """Source files state contracts; which issue a line came from lives in git."""
    import re

    ROOT = PACKAGE.parents[1]
    issue = re.compile(r"\b[Ii]ssues? #?\d+")
    files = [*(ROOT / "src").rglob("*.py"), *(ROOT / "workflow").rglob("*.smk")]
    files += [ROOT / "Snakefile", *(ROOT / "workflow" / "scripts").glob("*.py")]
    files += [*(ROOT / "tests").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")]
    files += [*(ROOT / "scripts").rglob("*.py")]
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in files
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if issue.search(line)
    ]
    assert not found, found


def test_no_test_module_imports_another():
    """Tests share code through conftest.py and helper modules (``*_helpers.py``,
    ``*_oracle(s).py``), never by importing a test module: collecting one would run its
    module-level set-up twice and tie the modules' fixtures together."""
    tests = Path(__file__).resolve().parent
    names = {p.stem for p in tests.rglob("test_*.py")}
    found = []
    for path in tests.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found += [(path.name, a.name) for a in node.names if a.name in names]
            elif isinstance(node, ast.ImportFrom) and node.module in names:
                found.append((path.name, node.module))
    assert len(names) > 50 and found == []
