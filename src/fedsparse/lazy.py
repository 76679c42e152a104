"""Names loaded on first use: the one way a fedsparse module defers an import.

Every Snakemake process, a cluster job's own included, imports the package to read a plan,
and ``fedsparse query`` builds the results schema from the algorithms' declarations; neither
runs a kernel. So numba, SciPy and the kernels (most of a cold start) load only when a run
first calls one. Two forms, both visible to the import-graph tests (``tests/test_imports.py``
follows their module names as imports):

* :func:`lazy_names` makes a module's ``__getattr__`` (PEP 562): each name is imported from
  its module, or computed, the first time it is read;
* :class:`LazyModule` stands for a whole module, imported when one of its attributes is read
  (a family names its kernels this way).

fedsparse's own modules write module names out in full (``"fedsparse.training.experiment"``), never
built, so that a reader and the tests can follow them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["LazyModule", "lazy_names"]


def lazy_names(
    module: str,
    sources: Mapping[str, str | Callable[[], Any]],
    fallback: Callable[[str], Any] | None = None,
) -> Callable[[str], Any]:
    """A module ``__getattr__`` that loads ``sources`` on first read.

    Parameters
    ----------
    module
        The name of the module it serves (``__name__``), for its error message.
    sources
        Each name to the full name of the module it is imported from (the attribute of the
        same name there), or to a function of no arguments that computes it.
    fallback
        Called with a name not in ``sources``; it returns the value or raises AttributeError.

    Returns
    -------
    callable
        ``__getattr__(name)``: the value, loaded again on every read (modules are imported
        once by Python; a function in ``sources`` caches its own result where that matters).
        A name found nowhere raises AttributeError naming the module, as Python does.
    """

    def __getattr__(name: str) -> Any:
        source = sources.get(name)
        if isinstance(source, str):
            return getattr(importlib.import_module(source), name)
        if source is not None:
            return source()
        if fallback is not None:
            return fallback(name)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


class LazyModule:
    """A module imported when one of its attributes is first read: a family's algorithms name
    their kernels (and numba) through these, so the registry can import the classes for their
    declarations without loading any kernel."""

    __slots__ = ("module_name",)

    def __init__(self, module_name: str):
        self.module_name = module_name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self.module_name), attr)

    def __repr__(self) -> str:
        return f"LazyModule({self.module_name!r})"
