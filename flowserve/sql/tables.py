"""Tables for statements: CSV or Parquet files registered by name (CSV must be UTF-8)."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb

from flowserve.sql.errors import SQLInputError

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_utf8(path: Path) -> None:
    """A precise error (line, byte) for a file that is not UTF-8."""
    line = 1
    with path.open("rb") as f:
        offset = 0
        tail = b""
        while chunk := f.read(1 << 20):
            data = tail + chunk
            try:
                data.decode("utf-8")
                tail = b""
            except UnicodeDecodeError as e:
                if e.end >= len(data) - 3 and e.reason == "unexpected end of data":
                    tail = data[e.start:]  # a character split across chunks
                else:
                    where = offset - len(tail) + e.start
                    line += data[:e.start].count(b"\n")
                    raise SQLInputError(f"{path}: not UTF-8 (invalid byte 0x{data[e.start]:02x} at byte {where}, "
                                        f"line {line}); re-encode it, e.g. iconv -f latin1 -t utf-8") from None
            line += chunk.count(b"\n")
            offset += len(chunk)
    if tail:
        raise SQLInputError(f"{path}: not UTF-8 (truncated character at the end of the file)")


def register_table(con: duckdb.DuckDBPyConnection, name: str, path: str | Path) -> None:
    if not _NAME.match(name):
        raise SQLInputError(f"table name {name!r}: use letters, digits and underscores")
    p = Path(path)
    if not p.is_file():
        raise SQLInputError(f"table {name}: no such file {str(p)!r}")
    suffix = p.suffix.lower()
    if suffix == ".csv":
        check_utf8(p)
        src = "read_csv(?, header=true, all_varchar=false)"
    elif suffix in (".parquet", ".pq"):
        src = "read_parquet(?)"
    else:
        raise SQLInputError(f"table {name}: {str(p)!r} is neither .csv nor .parquet")
    try:
        con.execute(f'CREATE OR REPLACE TABLE "{name}" AS SELECT * FROM {src}', [str(p)])
    except duckdb.Error as e:
        raise SQLInputError(f"table {name}: cannot read {str(p)!r}: {str(e).splitlines()[0]}") from None


def parse_table_arg(arg: str) -> tuple[str, str]:
    """`name=path.csv` (or a bare path: the table is named after the file's stem)."""
    if "=" in arg:
        name, path = arg.split("=", 1)
    else:
        path, name = arg, Path(arg).stem
    return name.strip(), path.strip()
