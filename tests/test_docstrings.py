"""Docstrings state contracts: every public function or method of the user-facing and
layer-boundary modules that takes three or more arguments has a numpydoc ``Parameters``
section naming each of them, as its signature spells them.

The numba kernels are out of scope (their module docstrings document their arrays), as are
the families' kernels and algorithms and the cost model."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "fedsparse"

# the user-facing and layer-boundary modules
MODULES = [
    "training/experiment.py",
    "objective/model.py",
    "sweep/plan.py",
    "sweep/sharding.py",
    "results/run_store.py",
    "pipeline/shard_runner.py",
    "results/schema.py",
    "results/aggregate.py",
    "pipeline/steps.py",
    "sweep/plan_file.py",
    "results/checkpoint.py",
    "pipeline/progress.py",
    "sweep/cost_learning.py",
    "training/config.py",
    "sweep/checks.py",
]
PACKAGES = ["data", "query", "report", "tune"]  # every module in them
FAMILY_MODULES = "families/*/analysis.py"
MIN_ARGUMENTS = 3  # not counting self or cls


def scoped_files() -> list[Path]:
    files = [PACKAGE / name for name in MODULES]
    for package in PACKAGES:
        files += sorted((PACKAGE / package).glob("*.py"))
    files += sorted(PACKAGE.glob(FAMILY_MODULES))
    return files


def arguments(node: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> list[str]:
    """The argument names of ``node``'s signature, ``*args`` and ``**kwargs`` included; a
    method's first (self or cls) left out unless it is a staticmethod."""
    a = node.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    names += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)
    if method and not static and names:
        names = names[1:]
    return names


def public_functions(tree: ast.Module):
    """(qualified name, node, argument names) of each public module-level function and each
    public method of a public class."""
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    for node in tree.body:
        if isinstance(node, functions) and not node.name.startswith("_"):
            yield node.name, node, arguments(node, method=False)
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for item in node.body:
                if isinstance(item, functions) and not item.name.startswith("_"):
                    yield f"{node.name}.{item.name}", item, arguments(item, method=True)


def _rule(line: str) -> bool:
    text = line.strip()
    return len(text) >= 3 and set(text) == {"-"}


def documented_parameters(doc: str | None) -> list[str] | None:
    """The names a numpydoc ``Parameters`` section lists (stars stripped), or None if the
    docstring has no such section. ``doc`` is cleaned (``ast.get_docstring``): entries start
    at column 0, their descriptions are indented, the section ends at the next header."""
    if not doc:
        return None
    lines = doc.splitlines()
    for i in range(len(lines) - 1):
        if lines[i].strip() == "Parameters" and _rule(lines[i + 1]):
            names = []
            for j in range(i + 2, len(lines)):
                line = lines[j]
                if not line or line[0].isspace():
                    continue  # a description, or a blank line
                if j + 1 < len(lines) and _rule(lines[j + 1]):
                    break  # the next section's header
                head = line.split(" : ", 1)[0]  # "name : type"
                names += [n.strip().lstrip("*") for n in head.split(",") if n.strip()]
            return names
    return None


def problems(source: str, where: str = "<source>") -> list[str]:
    """Each public function or method of ``source`` with MIN_ARGUMENTS or more arguments
    whose docstring has no Parameters section, leaves an argument out, or names one the
    signature does not have."""
    found = []
    for name, node, args in public_functions(ast.parse(source)):
        if len(args) < MIN_ARGUMENTS:
            continue
        at = f"{where}:{node.lineno} {name}"
        listed = documented_parameters(ast.get_docstring(node))
        if listed is None:
            found.append(f"{at}: no numpydoc Parameters section")
            continue
        wanted = [a.lstrip("*") for a in args]
        missing = [a for a in wanted if a not in listed]
        unknown = [n for n in listed if n not in wanted]
        if missing:
            found.append(f"{at}: Parameters leaves out {', '.join(missing)}")
        if unknown:
            found.append(f"{at}: Parameters names {', '.join(unknown)}, not in the signature")
    return found


def test_public_functions_document_their_parameters():
    files = scoped_files()
    missing_files = [str(p.relative_to(PACKAGE)) for p in files if not p.is_file()]
    assert not missing_files, f"modules in scope that do not exist: {missing_files}"
    assert len(files) > 50  # the packages' modules were found
    found = []
    checked = 0
    for path in files:
        source = path.read_text()
        found += problems(source, str(path.relative_to(PACKAGE.parent)))
        tree = ast.parse(source)
        checked += sum(len(a) >= MIN_ARGUMENTS for _, _, a in public_functions(tree))
    assert checked > 100  # the walk really reaches the functions in scope
    assert not found, "\n".join(found)


def test_the_check_catches_an_undocumented_function():
    source = '''
def documented(a, b, *args, c=1, **kwargs):
    """Summary.

    Parameters
    ----------
    a, b
        Two.
    *args
        More.
    c : int
        One.
    kwargs
        The rest.

    Returns
    -------
    a_result
        Not a parameter.
    """

def undocumented(a, b, c):
    """Summary, with a, b and c in prose only."""

def short(a, b):
    """Two arguments: no section needed."""

def _private(a, b, c):
    pass

def stale(a, b, c):
    """Summary.

    Parameters
    ----------
    a
    b
    d
        Gone from the signature.
    """

class Public:
    def method(self, a, b):
        """Two besides self: no section needed."""

    def wide(self, a, b, c):
        """No section."""

    @staticmethod
    def static(a, b, c):
        """No section."""

    @classmethod
    def build(cls, a, b):
        """Two besides cls."""

class _Private:
    def wide(self, a, b, c):
        pass
'''
    found = problems(source)
    assert [f.split(" ", 1)[1] for f in found] == [
        "undocumented: no numpydoc Parameters section",
        "stale: Parameters leaves out c",
        "stale: Parameters names d, not in the signature",
        "Public.wide: no numpydoc Parameters section",
        "Public.static: no numpydoc Parameters section",
    ]
