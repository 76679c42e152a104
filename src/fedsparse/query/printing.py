"""Rows out: an aligned table on the terminal, CSV (stdout or a file) or Parquet."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from ..atomic import atomic_write
from ..errors import FedsparseError, one_line

FORMATS = ("table", "csv", "parquet")
DEFAULT_LIMIT = 40


def output_format(fmt: str | None, output: str | Path | None) -> str:
    """The output format: ``fmt``, else from ``output``'s suffix, else table. Checked before
    any query runs, so a wrong combination costs nothing and writes nothing."""
    if fmt is None:
        if output is None:
            return "table"
        suffix = Path(output).suffix.lower()
        if suffix in (".csv", ".parquet"):
            return suffix[1:]
        raise FedsparseError(f"-o {output}: give --format csv or parquet (or a .csv/.parquet name)")
    if fmt not in FORMATS:
        raise FedsparseError(f"--format {fmt}: must be one of {', '.join(FORMATS)}")
    if fmt == "table" and output is not None:
        raise FedsparseError("--format table prints to the terminal; use csv or parquet with -o")
    if fmt == "parquet" and output is None:
        raise FedsparseError("--format parquet needs -o FILE")
    return fmt


def write_rows(
    reader: pa.RecordBatchReader,
    fmt: str,
    output: str | Path | None = None,
    limit: int = DEFAULT_LIMIT,
    stdout: TextIO | None = None,
) -> int:
    """Write the rows as an aligned table, CSV or Parquet.

    Parameters
    ----------
    reader
        The rows, streamed.
    fmt
        ``table`` (printed), ``csv`` or ``parquet`` (:func:`output_format`).
    output
        The file written, atomically; None: ``stdout`` (CSV or table only).
    limit
        Rows a table shows at most (0: all); a line then counts the rest. Files get every row.
    stdout
        Where a table or CSV without ``output`` goes (None: ``sys.stdout``).

    Returns
    -------
    int
        The number of rows read (all of them, also where a table shows fewer).

    Raises
    ------
    FedsparseError
        One line for a DuckDB error raised while the rows are computed.
    """
    stdout = stdout or sys.stdout
    try:
        if fmt == "table":
            return _print_table(reader, limit, stdout)
        if output is None:  # csv on stdout
            stdout.flush()
            return _write_batches(reader, pacsv.CSVWriter(stdout.buffer, reader.schema))
        with atomic_write(output) as fh:
            writer = pacsv.CSVWriter if fmt == "csv" else pq.ParquetWriter
            return _write_batches(reader, writer(fh, reader.schema))
    except duckdb.Error as exc:  # errors raised while the rows are computed
        raise FedsparseError(f"query: {one_line(exc)}") from None


def _write_batches(reader: pa.RecordBatchReader, writer) -> int:
    """Stream ``reader`` into a pyarrow CSV or Parquet writer; return the number of rows."""
    rows = 0
    with writer:
        for batch in reader:
            writer.write_batch(batch)
            rows += batch.num_rows
    return rows


def _print_table(reader: pa.RecordBatchReader, limit: int, out: TextIO) -> int:
    shown: list[pa.RecordBatch] = []
    kept = total = 0
    for batch in reader:
        if limit <= 0 or kept < limit:
            take = batch.num_rows if limit <= 0 else min(batch.num_rows, limit - kept)
            shown.append(batch.slice(0, take))
            kept += take
        total += batch.num_rows
    out.write(format_table(pa.Table.from_batches(shown, schema=reader.schema)))
    if total > kept:
        out.write(f"... {total - kept} more rows not shown ({total} in all; --limit 0 shows all)\n")
    else:
        out.write(f"({total} row{'s' if total != 1 else ''})\n")
    return total


def format_table(table: pa.Table) -> str:
    """An aligned plain-text table: numbers right-aligned, nulls shown as NULL."""
    names = table.column_names
    numeric = [
        pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
        for t in table.schema.types
    ]
    cells = [[cell(v) for v in col.to_pylist()] for col in table.columns]
    widths = [max([len(n), *map(len, c)]) for n, c in zip(names, cells, strict=True)]

    def line(values: list[str]) -> str:
        parts = [
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=True)
        ]
        return "  ".join(parts).rstrip() + "\n"

    text = line(names) + line(["-" * w for w in widths])
    for i in range(table.num_rows):
        text += line([c[i] for c in cells])
    return text


def cell(v: object) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v).replace("\n", "\\n")
