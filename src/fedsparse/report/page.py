"""A report page: HTML fragments, embedded figures and tables, written as one file.

Every page is self-contained: CSS inline, figures embedded as base64 PNGs (and also saved as
``figures/NAME.png`` for reuse), so a page opens with no other file beside it.
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import numpy as np
import pandas as pd

from .figures import DPI, plt

__all__ = ["CSS", "Page", "html_table"]

CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0 auto;
       max-width: 1180px; padding: 1.2em 2em 4em; color: #222; line-height: 1.45; }
h1 { margin-bottom: .2em; } h2 { border-bottom: 2px solid #ddd; padding-bottom: .2em;
     margin-top: 2.2em; } h3 { margin-top: 1.6em; }
table { border-collapse: collapse; margin: .6em 0 1em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f2f2f2; } tr:nth-child(even) td { background: #fafafa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
img { max-width: 100%; height: auto; border: 1px solid #eee; }
.note { background: #fff8e1; border-left: 4px solid #f0b400; padding: .4em .8em; }
.muted { color: #666; font-size: 90%; } ul.verdicts li { margin-bottom: .3em; }
nav ul { columns: 2; } code { background: #f4f4f4; padding: 0 3px; }
td.agree { background: #e3f4e1 !important; } td.disagree { background: #fbe3e0 !important; }
td.unmeasured { background: #eeeeee !important; color: #555; }
"""


class Page:
    """Collects HTML fragments, figures and tables while the report is built."""

    def __init__(self, root: Path):
        self.root = root
        self.parts: list[str] = []
        self.figures: list[str] = []
        (root / "figures").mkdir(exist_ok=True)

    def add(self, fragment: str) -> None:
        self.parts.append(fragment)

    def text(self, tag: str, text: str, cls: str | None = None) -> None:
        """Append an element holding ``text``, HTML-escaped.

        Parameters
        ----------
        tag
            The element's tag, e.g. ``"p"`` or ``"h3"``.
        text
            Its plain text.
        cls
            Its ``class`` attribute; None: none.
        """
        attr = f' class="{cls}"' if cls else ""
        self.add(f"<{tag}{attr}>{html.escape(text)}</{tag}>")

    def heading(self, tag: str, text: str, anchor: str) -> None:
        """Append a heading other pages can link to (``page.html#anchor``).

        Parameters
        ----------
        tag
            The heading's tag, e.g. ``"h2"``.
        text
            Its plain text (HTML-escaped).
        anchor
            Its ``id``.
        """
        self.add(f'<{tag} id="{html.escape(anchor)}">{html.escape(text)}</{tag}>')

    def figure(self, fig, name: str, alt: str) -> None:
        """Embed a figure as a base64 PNG and save it as ``figures/<name>.png``; closes the figure.

        Parameters
        ----------
        fig
            A matplotlib figure; None: nothing is added.
        name
            The PNG's name (without suffix) under ``figures/``.
        alt
            The image's alternative text.
        """
        if fig is None:
            return
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=DPI)
        plt.close(fig)
        data = buf.getvalue()
        (self.root / "figures" / f"{name}.png").write_bytes(data)
        self.figures.append(name)
        b64 = base64.b64encode(data).decode("ascii")
        self.add(
            f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,{b64}">'
            f'<figcaption class="muted">figures/{html.escape(name)}.png</figcaption>'
            "</figure>"
        )

    def table(self, df: pd.DataFrame, formats: dict | None = None) -> None:
        self.add(html_table(df, formats or {}))

    def write(self, name: str, title: str) -> Path:
        """Write the page as ``root/name``; return its path."""
        doc = (
            f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{html.escape(title)}</title><style>{CSS}</style></head>\n<body>\n"
            + "\n".join(self.parts)
            + "\n</body></html>\n"
        )
        path = self.root / name
        path.write_text(doc, encoding="utf-8")
        return path


def html_table(df: pd.DataFrame, formats: dict) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    body = []
    for row in df.itertuples(index=False):  # display rows only (a few per data set)
        cells = []
        for col, v in zip(df.columns, row, strict=True):
            fmt = formats.get(col)
            if fmt is not None and not _missing(v):
                text, num = fmt(v), True
            elif _missing(v):
                text, num = "", False
            elif isinstance(v, float | np.floating):
                text, num = f"{v:.4g}", True
            else:
                text = str(v)
                num = isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_)
            cls = ' class="num"' if num else ""
            cells.append(f"<td{cls}>{html.escape(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _missing(v) -> bool:
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False
