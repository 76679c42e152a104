"""The built-in families, each one folder shaped exactly like a plug-in package.

A family package defines ``ALGORITHMS`` (its algorithm classes), and may define ``REPORT`` (the
module of its report page, defining ``FAMILY``) and ``ORDER`` (where its page and its algorithms
go among the families: lower first; a family that says nothing comes after the built-in ones).
It is registered by one entry point in the group ``fedsparse.algorithms``: the built-in ones in
this project's ``pyproject.toml``, a plug-in's in its own (docs/adding-an-algorithm.md). Nothing
outside a family's folder names it.
"""
