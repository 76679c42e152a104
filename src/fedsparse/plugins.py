"""The installed algorithm families as their entry points name them, read without importing any.

Families register by an entry point in the group :data:`GROUP` (this package's own in its
``pyproject.toml``, a plug-in's in its own; :mod:`fedsparse.algorithms.registry` loads them).
This module only reads the installed metadata and finds files, so the kernels may use it
while they load (:func:`builtin_kernel_sources`, for their numba cache key) and it imports
nothing of this package.
"""

from __future__ import annotations

import importlib.util
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Any

GROUP = "fedsparse.algorithms"
PACKAGE = __name__.split(".")[0]  # an entry point into this package is a built-in family


def entry_points() -> list[Any]:
    """The installed entry points of :data:`GROUP`, by name then value."""
    from importlib.metadata import entry_points

    return sorted(entry_points(group=GROUP), key=lambda ep: (ep.name, ep.value))


def is_builtin(ep: Any) -> bool:
    """True for an entry point into this package (a built-in family)."""
    return ep.value.split(":")[0].split(".")[0] == PACKAGE


def builtin_kernel_sources() -> list[Path]:
    """The source file of each built-in family's own numba kernels, sorted by path.

    A family's kernels are the ``kernels`` module of its package
    (docs/adding-an-algorithm.md); a family that is one module, or has none, adds nothing. The
    files are found, not imported: only the parents of each family package are imported. Plug-in
    families are left out: the key covers this package's sources, and numba's own cache already
    notices an edit to the file that defines a function.
    """
    found = set()
    for ep in entry_points():
        if not is_builtin(ep):
            continue
        family = importlib.util.find_spec(ep.value.split(":")[0])
        if family is None or not family.submodule_search_locations:
            continue
        spec = PathFinder.find_spec(f"{family.name}.kernels", family.submodule_search_locations)
        if spec is not None and spec.origin:
            found.add(Path(spec.origin))
    return sorted(found)
