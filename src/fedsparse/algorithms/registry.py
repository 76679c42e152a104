"""The registry: every algorithm a config may name, the built-in ones and any plugin's.

A *family* is a module that lists its algorithm classes in ``ALGORITHMS`` (a tuple) and may
name its report page in ``REPORT`` (a module defining ``FAMILY``, a
``fedsparse.report.claims.Family``). The built-in families are the modules of ``BUILTIN``;
another package adds a family with an entry point in the group ``fedsparse.algorithms``
naming such a module, or a single algorithm class (docs/adding-an-algorithm.md)::

    [project.entry-points."fedsparse.algorithms"]
    toy = "toy_fedsparse.toy"            # or "toy_fedsparse.toy:ToyGD"

Everything else derives from the classes' declarations: the results' typed columns
(``fedsparse.results``), config validation, the report's labels, colours and family pages,
the generated docs and the benchmarks. Nothing is loaded at import: the families and the
entry points are read once, the first time the registry is used (the plan's readers use it
never, ``import fedsparse.results`` only when a schema is first needed). Families load by
module name, as a plugin's do, so no module of this package imports a family directly.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any

from ..errors import FedsparseError

GROUP = "fedsparse.algorithms"
# The built-in families in the order of their papers (seeds 000/001, 002, 003, 004), then the
# shared FedAvg baseline: the order of ALGORITHMS, of the docs' tables and of the report's pages.
BUILTIN = (
    "fedsparse.algorithms.hardthreshold",
    "fedsparse.algorithms.personalized",
    "fedsparse.algorithms.gradsparse",
    "fedsparse.algorithms.ssca",
    "fedsparse.algorithms.fedavg",
)


@dataclass(frozen=True)
class Registered:
    """One family as registered: where it came from (``source``: the built-in module, or
    ``entry point NAME (VALUE)``), its algorithm classes and its report page module."""

    source: str
    module: str
    algorithms: tuple[type, ...]
    report: str | None
    builtin: bool


def _entry_points() -> list[Any]:
    from importlib.metadata import entry_points

    return sorted(entry_points(group=GROUP), key=lambda ep: (ep.name, ep.value))


def _family(obj: Any, source: str, builtin: bool) -> Registered:
    """A loaded module or class as a family; FedsparseError naming ``source`` if it is not one."""
    from .base import Algorithm

    if isinstance(obj, type):
        classes, report, module = (obj,), None, obj.__module__
    else:
        classes = getattr(obj, "ALGORITHMS", None)
        report, module = getattr(obj, "REPORT", None), getattr(obj, "__name__", repr(obj))
        if not isinstance(classes, tuple | list) or not classes:
            raise FedsparseError(
                f"{source}: names neither an algorithm class nor a module with ALGORITHMS, "
                "a tuple of algorithm classes"
            )
    for cls in classes:
        if not (isinstance(cls, type) and issubclass(cls, Algorithm)):
            raise FedsparseError(f"{source}: {cls!r} is not a fedsparse Algorithm subclass")
        if not isinstance(getattr(cls, "name", None), str) or not cls.name:
            raise FedsparseError(f"{source}: {cls.__qualname__} declares no name")
    if report is not None and not isinstance(report, str):
        raise FedsparseError(f"{source}: REPORT must be a module name, got {report!r}")
    return Registered(source, module, tuple(classes), report, builtin)


_LOADING: list[bool] = []


def _load(entry_points: list[Any] | None = None, plugins: bool = True) -> list[Registered]:
    """The built-in families, then each entry point's (sorted by name); a name collision is a
    one-line FedsparseError naming both."""
    if _LOADING:
        raise FedsparseError(
            "the algorithm registry was used while it was loading (a family module reads the "
            "registry or fedsparse.results' schemas at import: read them in a function instead)"
        )
    _LOADING.append(True)
    try:
        out = [_family(importlib.import_module(m), m, True) for m in BUILTIN]
        if plugins:
            for ep in _entry_points() if entry_points is None else entry_points:
                source = f"entry point {ep.name} ({ep.value})"
                try:
                    obj = ep.load()
                except Exception as exc:  # a broken plugin: say which, in one line
                    msg = " ".join(str(exc).split())
                    raise FedsparseError(
                        f"{source} in group {GROUP}: cannot load it: {type(exc).__name__}: {msg}"
                    ) from exc
                out.append(_family(obj, source, False))
    finally:
        _LOADING.clear()
    seen: dict[str, tuple[str, type]] = {}
    for fam in out:
        for cls in fam.algorithms:
            if cls.name in seen:
                other, prev = seen[cls.name]
                raise FedsparseError(
                    f"algorithm name {cls.name!r} is registered twice: "
                    f"{prev.__module__}.{prev.__qualname__} ({other}) and "
                    f"{cls.__module__}.{cls.__qualname__} ({fam.source})"
                )
            seen[cls.name] = (fam.source, cls)
    return out


_FAMILIES: dict[bool, list[Registered]] = {}


def families(plugins: bool = True) -> list[Registered]:
    """The registered families, built-in first (read once per process); ``plugins=False``:
    the built-in ones only (what the generated docs and the pinned schema describe)."""
    if plugins not in _FAMILIES:
        _FAMILIES[plugins] = _load(plugins=plugins)
    return _FAMILIES[plugins]


def classes(plugins: bool = True) -> dict[str, type]:
    """Algorithm name -> class, in registry order."""
    return {cls.name: cls for fam in families(plugins) for cls in fam.algorithms}


def report_pages() -> list[str]:
    """The modules of the families' report pages, in registry order, each once."""
    return list(dict.fromkeys(f.report for f in families() if f.report))


class Registry(MutableMapping):
    """``ALGORITHMS``: name -> class, read on first use. A mapping like the dict it replaces
    (tests may set an entry for the length of a test: that changes no schema)."""

    def __init__(self) -> None:
        self._classes: dict[str, type] | None = None

    def _all(self) -> dict[str, type]:
        if self._classes is None:
            self._classes = classes()
        return self._classes

    def __getitem__(self, name: str) -> type:
        return self._all()[name]

    def __setitem__(self, name: str, cls: type) -> None:
        self._all()[name] = cls

    def __delitem__(self, name: str) -> None:
        del self._all()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def __contains__(self, name: object) -> bool:
        return name in self._all()

    def __repr__(self) -> str:
        return f"Registry({list(self._all())})"


ALGORITHMS = Registry()
