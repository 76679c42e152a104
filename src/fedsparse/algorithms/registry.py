"""The registry: every algorithm a config may name, the built-in ones and any plugin's.

A *family* is a module (usually a package, one folder) that lists its algorithm classes in
``ALGORITHMS`` (a tuple), and may name its report page in ``REPORT`` (a module defining
``FAMILY``, a ``fedsparse.report.claims.Family``) and its place among the families in ``ORDER``
(lower first; default after the built-in ones, then by entry-point name). Every family, built-in
or a plugin's, is registered the same way: an entry point in the group ``fedsparse.algorithms``
naming such a module, or a single algorithm class (docs/adding-an-algorithm.md). The built-in
families are the folders of ``fedsparse/families/``, registered in this project's
``pyproject.toml``::

    [project.entry-points."fedsparse.algorithms"]
    toy = "toy_fedsparse.toy"            # or "toy_fedsparse.toy:ToyGD"

Everything else derives from the classes' declarations: the results' typed columns
(``fedsparse.results.schema``), config validation, the report's labels, colours and family pages,
the generated docs and the benchmarks. Nothing is loaded at import: the entry points are read
once, the first time the registry is used (the plan's readers use it never, ``import
fedsparse.results.schema`` only when a schema is first needed). Families load by entry point, so no
module outside a family's folder imports it or names it.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any

from ..errors import FedsparseError
from ..plugins import GROUP, PACKAGE, is_builtin
from ..plugins import entry_points as installed_entry_points

LAST = float("inf")  # the ORDER of a family that declares none


@dataclass(frozen=True)
class Registered:
    """One family as registered: where it came from (``source``: the built-in module, or
    ``entry point NAME (VALUE)``), its algorithm classes and its report page module."""

    source: str
    module: str
    algorithms: tuple[type, ...]
    report: str | None
    builtin: bool
    order: float = LAST


def _family(obj: Any, source: str, builtin: bool) -> Registered:
    """A loaded module or class as a family; FedsparseError naming ``source`` if it is not one."""
    from .base import Algorithm

    order = LAST
    if isinstance(obj, type):
        classes, report, module = (obj,), None, obj.__module__
    else:
        classes = getattr(obj, "ALGORITHMS", None)
        report, module = getattr(obj, "REPORT", None), getattr(obj, "__name__", repr(obj))
        order = getattr(obj, "ORDER", LAST)
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
    if not isinstance(order, int | float) or isinstance(order, bool):
        raise FedsparseError(f"{source}: ORDER must be a number, got {order!r}")
    return Registered(source, module, tuple(classes), report, builtin, order)


_LOADING: list[bool] = []


def _load(entry_points: list[Any] | None = None, plugins: bool = True) -> list[Registered]:
    """Every registered family, by ``ORDER`` then entry-point name: this package's own, then
    (unless ``plugins=False``) the installed plugins' or those of ``entry_points``. A name
    collision is a one-line FedsparseError naming both."""
    if _LOADING:
        raise FedsparseError(
            "the algorithm registry was used while it was loading (a family module reads the "
            "registry or the schemas of fedsparse.results.schema at import: read them in a "
            "function instead)"
        )
    installed = installed_entry_points()
    points = [ep for ep in installed if is_builtin(ep)]
    if not points:
        raise FedsparseError(
            f"{PACKAGE}'s own algorithm families are not registered (no entry point of group "
            f"{GROUP} in its installed metadata): reinstall it, e.g. pip install -e ."
        )
    if plugins:
        others = installed if entry_points is None else entry_points
        points += [ep for ep in others if not is_builtin(ep)]
    _LOADING.append(True)
    try:
        out = []
        for ep in points:
            builtin = is_builtin(ep)
            source = f"entry point {ep.name} ({ep.value})"
            try:
                obj = ep.load()
            except Exception as exc:  # a broken plugin: say which, in one line
                msg = " ".join(str(exc).split())
                raise FedsparseError(
                    f"{source} in group {GROUP}: cannot load it: {type(exc).__name__}: {msg}"
                ) from exc
            out.append(_family(obj, source, builtin))
    finally:
        _LOADING.clear()
    out.sort(key=lambda fam: (fam.order, not fam.builtin, fam.source))
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
