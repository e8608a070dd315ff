"""Tables for statements: CSV or Parquet files, or Arrow tables, registered by name.

A table is read by a connection of its own (CSV must be UTF-8) and copied into the
statement's connection as an Arrow table, so a sandboxed statement connection never
touches the file system. Names are identifiers, always quoted in the SQL made here.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pyarrow as pa

from flowserve.sql.duck import embedded_connection
from flowserve.sql.errors import SQLInputError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def table_name(name: object) -> str:
    """`name` if it is an identifier (letters, digits, underscores), else SQLInputError."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or len(name) > 128:
        raise SQLInputError(f"table name {str(name)[:80]!r}: use letters, digits and underscores "
                            f"(not starting with a digit, at most 128)")
    return name


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


def read_table(name: str, path: str | Path) -> pa.Table:
    """A CSV (UTF-8, with a header) or Parquet file as an Arrow table."""
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
    con = embedded_connection(external_access=True)
    try:
        return con.sql(f"SELECT * FROM {src}", params=[str(p)]).to_arrow_table()
    except duckdb.Error as e:
        raise SQLInputError(f"table {name}: cannot read {str(p)!r}: {str(e).splitlines()[0]}") from None
    finally:
        con.close()


def register_table(con: duckdb.DuckDBPyConnection, name: object, source: object) -> None:
    """`CREATE OR REPLACE TABLE "name"` from a file path or an Arrow table."""
    name = table_name(name)
    if isinstance(source, str | Path):
        source = read_table(name, source)
    if not isinstance(source, pa.Table):
        raise SQLInputError(f"table {name}: the source must be a CSV/Parquet path or a pyarrow.Table, "
                            f"got {type(source).__name__}")
    view = f"__fs_src_{name}"
    con.register(view, source)
    try:
        con.execute(f'CREATE OR REPLACE TABLE "{name}" AS SELECT * FROM "{view}"')
    except duckdb.Error as e:
        raise SQLInputError(f"table {name}: {str(e).splitlines()[0]}") from None
    finally:
        con.unregister(view)


def parse_table_arg(arg: str) -> tuple[str, str]:
    """`name=path.csv` (or a bare path: the table is named after the file's stem)."""
    if "=" in arg:
        name, path = arg.split("=", 1)
    else:
        path, name = arg, Path(arg).stem
    return name.strip(), path.strip()
