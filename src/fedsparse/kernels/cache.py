"""Where numba keeps the kernels' machine code: one directory per kernel module.

A cached kernel's machine code holds the helpers it calls from other modules, and numba's own
cache only notices an edit to the file that defines the kernel. So each module of this package
that defines cached kernels gets a directory of its own, named by a hash of its source and of
the source of every module of the package it imports, directly or through others
(:func:`import_closure`). An edit recompiles exactly the kernels whose machine code can contain
the edited code; a package version with changed kernels never loads old machine code.

Functions outside the package (a plug-in family's kernels, which may call these) keep numba's
own location under ``numba.config.CACHE_DIR``, a directory keyed by all of the package's kernel
sources (:func:`configure`).

The base directory is ``FEDSPARSE_NUMBA_CACHE`` (or numba's ``NUMBA_CACHE_DIR``) if set; inside
a SLURM job, node-local ``$TMPDIR`` (or /tmp), so jobs on many nodes do not write machine code to
a shared home directory; else ~/.cache/fedsparse/numba.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from pathlib import Path

import numba
from numba.core import caching

PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # the fedsparse package directory

# numba 0.68 names these publicly; older versions with a leading underscore.
_UserProvided = (
    getattr(caching, "UserProvidedCacheLocator", None) or caching._UserProvidedCacheLocator
)
_CacheImpl = getattr(caching, "CacheImpl", None) or caching._CacheImpl


def cache_base() -> str:
    """The directory under which every key's directory lies (module docstring)."""
    base = os.environ.get("FEDSPARSE_NUMBA_CACHE") or os.environ.get("NUMBA_CACHE_DIR")
    if not base and "SLURM_JOB_ID" in os.environ:
        local = os.environ.get("TMPDIR", "/tmp")
        base = os.path.join(local, f"fedsparse-numba-{os.getuid()}")
    if not base:
        base = os.path.join(
            os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "fedsparse", "numba"
        )
    return base


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_file(name: str) -> Path | None:
    return _module_file_in(PACKAGE_ROOT, name)


@functools.cache
def _module_file_in(root: Path, name: str) -> Path | None:
    parts = name.split(".")
    if parts[0] != root.name:
        return None
    base = root.parent.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


# A line that reads as an import statement, at any indentation (a parenthesised list may span
# lines): a line of a docstring that reads as one counts too, which can only add a dependency.
_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+([.\w]+)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)|import[ \t]+([^\n]+))",
    re.M,
)


def _names(text: str) -> list[str]:
    """The imported names of an import list: ``a as b, c  # comment`` -> ``[a, c]``."""
    text = text.split("#")[0] if "(" not in text else re.sub(r"#[^\n]*", "", text)
    names = (part.strip().split(" ")[0] for part in text.strip("() \t\\").split(","))
    return [n for n in names if n]


def direct_imports(path: Path) -> frozenset[Path]:
    """The package's module files that ``path`` (a file of the package) imports by name,
    relatively or absolutely, at any depth of its code: for ``from m import x``, the module
    ``m.x`` if there is one, else ``m``."""
    return _scan(path)[1]


def _scan(path: Path) -> tuple[bytes, frozenset[Path]]:
    """A file's source digest and its :func:`direct_imports`, read once per version of it."""
    st = path.stat()
    return _scan_version(path, st.st_mtime_ns, st.st_size)


@functools.cache
def _scan_version(path: Path, mtime_ns: int, size: int) -> tuple[bytes, frozenset[Path]]:
    source = path.read_bytes()
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[Path | None] = set()
    for module, names, plain in _IMPORT.findall(source.decode()):
        if plain:
            found.update(_module_file(n) for n in _names(plain))
            continue
        level = len(module) - len(module.lstrip("."))
        if level:
            anchor = package.rsplit(".", level - 1)[0] if level > 1 else package
            base = f"{anchor}.{module[level:]}" if module[level:] else anchor
        else:
            base = module
        for alias in _names(names):  # a submodule, or a name of the module itself
            found.add(_module_file(f"{base}.{alias}") or _module_file(base))
    found.discard(None)
    found.discard(path)
    return hashlib.sha256(source).digest(), frozenset(found)  # type: ignore[arg-type]


def import_closure(path: Path) -> list[Path]:
    """``path`` and every module of the package it imports, directly or through others,
    sorted."""
    seen, todo = {path}, [path]
    while todo:
        for dep in direct_imports(todo.pop()):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return sorted(seen)


@functools.cache
def module_key(path: Path) -> str:
    """16 hex digits of a hash of the sources of :func:`import_closure` (``path`` resolved, a
    file of the package), each with its path in the package."""
    digest = hashlib.sha256()
    for source in import_closure(path):
        digest.update(str(source.relative_to(PACKAGE_ROOT)).encode() + b"\0")
        digest.update(_scan(source)[0])
    return digest.hexdigest()[:16]


class KernelModuleLocator(_UserProvided):
    """numba's locator for the package's own functions: ``<base>/<module_key>/...``."""

    def __init__(self, py_func, py_file):
        super().__init__(py_func, py_file)
        self._cache_path = os.path.join(
            cache_base(),
            module_key(Path(py_file).resolve()),
            self.get_suitable_cache_subpath(py_file),
        )

    @classmethod
    def from_function(cls, py_func, py_file):
        if not Path(py_file).resolve().is_relative_to(PACKAGE_ROOT):
            return None
        return super().from_function(py_func, py_file)


def configure(all_kernel_sources: list[Path]) -> None:
    """Install :class:`KernelModuleLocator` ahead of numba's own and point
    ``numba.config.CACHE_DIR`` at ``<base>/<hash of all_kernel_sources>`` for other code.
    Call before any kernel module is imported: numba fixes a function's cache directory when
    the function is defined."""
    digest = hashlib.sha256()
    for source in all_kernel_sources:  # each file read once: the module keys reuse the scan
        digest.update(_scan(source.resolve())[0])
    numba.config.CACHE_DIR = os.path.join(cache_base(), digest.hexdigest()[:16])
    if KernelModuleLocator not in _CacheImpl._locator_classes:
        _CacheImpl._locator_classes = [KernelModuleLocator, *_CacheImpl._locator_classes]
