"""A database's catalog, read once at start-up: tables, columns, types, foreign keys and
example values, plus the column and table descriptions the agent's prompts quote.

Descriptions are generated from the data (type, key, references, example values) and
completed by the user's own where the configuration gives them
(`descriptions: {table: {description: ..., columns: {column: ...}}}`).
Reading uses its own read-only connection (no LLM SQL runs here).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flowserve.errors import ConfigError
from flowserve.sqlexec import SQLError, database_kind

EXAMPLES = 3  # example values per column in its description
MAX_VALUES = 5000  # distinct text values per column given to the entity index
MAX_VALUE_LEN = 80


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    description: str
    references: str | None = None  # "table.column" of a foreign key


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    description: str

    def ddl(self) -> str:
        cols = ",\n".join(f"  {c.name} {c.type}".rstrip() + _ref(c.references)
                          for c in self.columns)
        return f"CREATE TABLE {self.name} (\n{cols}\n);"


def _ref(ref: str | None) -> str:
    if not ref:
        return ""
    table, _, column = ref.partition(".")
    return f" REFERENCES {table}({column})"


@dataclass(frozen=True)
class Catalog:
    path: str
    kind: str  # sqlite | duckdb
    tables: tuple[Table, ...]
    values: Mapping[tuple[str, str], tuple[str, ...]]  # (table, column) → distinct text values

    def table(self, name: str) -> Table | None:
        return next((t for t in self.tables if t.name.lower() == name.lower()), None)

    def schema(self, names: tuple[str, ...] | None = None) -> str:
        """The DDL of the named tables (all when None), in catalog order."""
        keep = None if names is None else {n.lower() for n in names}
        return "\n".join(t.ddl() for t in self.tables if keep is None or t.name.lower() in keep)

    def descriptions(self, names: tuple[str, ...] | None = None) -> str:
        keep = None if names is None else {n.lower() for n in names}
        lines = []
        for t in self.tables:
            if keep is None or t.name.lower() in keep:
                lines.append(f"{t.name}: {t.description}")
                lines += [f"  {t.name}.{c.name}: {c.description}" for c in t.columns]
        return "\n".join(lines)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _rows_sqlite(path: str) -> Iterator[tuple[str, list[tuple[str, str, str | None]]]]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                           "AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        for t in names:
            fks = {r[3]: f"{r[2]}.{r[4]}" for r in con.execute(f"PRAGMA foreign_key_list({_q(t)})")}
            cols = [(r[1], r[2] or "", fks.get(r[1])) for r in con.execute(f"PRAGMA table_info({_q(t)})")]
            yield t, cols
    finally:
        con.close()


def _rows_duckdb(path: str) -> Iterator[tuple[str, list[tuple[str, str, str | None]]]]:
    import duckdb

    con = duckdb.connect(path, read_only=True, config={"enable_external_access": False})
    try:
        names = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables "
                                           "WHERE table_schema = 'main' ORDER BY table_name").fetchall()]
        for t in names:
            cols = con.execute("SELECT column_name, data_type FROM information_schema.columns "
                               "WHERE table_schema = 'main' AND table_name = ? ORDER BY ordinal_position",
                               [t]).fetchall()
            yield t, [(c, ty, None) for c, ty in cols]
    finally:
        con.close()


def _distinct(path: str, kind: str, table: str, column: str, limit: int) -> list[Any]:
    sql = (f"SELECT DISTINCT {_q(column)} FROM {_q(table)} WHERE {_q(column)} IS NOT NULL "
           f"LIMIT {int(limit)}")
    if kind == "sqlite":
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return [r[0] for r in con.execute(sql)]
        finally:
            con.close()
    import duckdb

    dcon = duckdb.connect(path, read_only=True, config={"enable_external_access": False})
    try:
        return [r[0] for r in dcon.execute(sql).fetchall()]
    finally:
        dcon.close()


def _is_text(ty: str) -> bool:
    t = ty.upper()
    return any(k in t for k in ("CHAR", "TEXT", "CLOB", "STRING")) or t == ""


def read_catalog(path: str | Path, user: Mapping[str, Any] | None = None) -> Catalog:
    """The catalog of a SQLite or DuckDB file; ConfigError names a missing, unreadable or
    empty database."""
    path = str(path)
    try:
        kind = database_kind(path)
        raw = list(_rows_sqlite(path) if kind == "sqlite" else _rows_duckdb(path))
    except (SQLError, sqlite3.Error) as e:
        raise ConfigError(f"text2sql: cannot read database {path!r}: {e}") from None
    except Exception as e:  # duckdb's errors (imported lazily)
        raise ConfigError(f"text2sql: cannot read database {path!r}: {e}") from None
    if not raw:
        raise ConfigError(f"text2sql: database {path!r} has no tables")
    user = user or {}
    tables, values = [], {}
    for t, cols in raw:
        mine = user.get(t, {}) if isinstance(user.get(t), Mapping) else {}
        col_notes = mine.get("columns", {}) if isinstance(mine.get("columns"), Mapping) else {}
        columns = []
        for name, ty, ref in cols:
            sample = _distinct(path, kind, t, name, MAX_VALUES if _is_text(ty) else EXAMPLES)
            text = [str(v) for v in sample if isinstance(v, str) and 0 < len(v) <= MAX_VALUE_LEN]
            if _is_text(ty) and text:
                values[(t, name)] = tuple(text)
            ex = ", ".join(repr(v) if isinstance(v, str) else str(v) for v in sample[:EXAMPLES])
            desc = f"{ty or 'untyped'}" + (f", references {ref}" if ref else "") + (f"; e.g. {ex}" if ex else "")
            if name in col_notes:
                desc = f"{col_notes[name]} ({desc})"
            columns.append(Column(name, ty, desc, ref))
        tdesc = str(mine.get("description", f"table {t} with {len(columns)} columns"))
        tables.append(Table(t, tuple(columns), tdesc))
    return Catalog(path, kind, tuple(tables), values)
