"""The registered `text2sql` workflow: configuration, databases and the agent's tools.

Configuration (`gateway.workflows.text2sql`):

    databases: {bank: builtin, chinook: chinook, mine: /data/sales.duckdb}   # SQLite or DuckDB files
    descriptions: {mine: {orders: {description: ..., columns: {amount: "in euros"}}}}
    candidates: 2, max_rounds: 3, unit_tests: 3, max_tokens: 256

`builtin` is the synthetic bank (`bank.py`), `chinook` the Chinook music store shipped
with the package. Every database is checked and catalogued at start-up (a missing or
unreadable file or one without tables is refused there) and value-indexed once, on its
first question.
Request inputs: `question` (required), `database` (default: the first configured),
`candidates` and `max_rounds` (capped by the configuration).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from flowserve.apps.base import WorkflowDef
from flowserve.apps.text2sql.agent import AgentConfig, ChessAgent
from flowserve.apps.text2sql.bank import create_demo_db
from flowserve.apps.text2sql.catalog import Catalog, read_catalog
from flowserve.apps.text2sql.entities import EntityIndexes, column_context, parse_keywords, render_entities
from flowserve.errors import ConfigError, RequestError

KNOWN = ("databases", "descriptions", "candidates", "max_rounds", "unit_tests", "max_tokens")
LIMITS = {"candidates": (1, 16), "max_rounds": (0, 10), "unit_tests": (0, 10), "max_tokens": (1, 8192)}
# Upper limits keep one request from fanning out without bound: 16 candidates × 11 rounds
# and 10 evaluations are above anything CHESS runs (2–3 candidates, ≤ 10 rounds, ≤ 11 tests).


def chinook_path() -> Path:
    return Path(str(resources.files("flowserve") / "data" / "sqlite" / "chinook.sqlite"))


def resolve_database(name: str, path: Any, cleanup: list[str]) -> str:
    if path == "builtin":
        tmp = tempfile.mkdtemp(prefix="flowserve-text2sql-")
        cleanup.append(tmp)
        return str(create_demo_db(Path(tmp) / f"{name}.sqlite"))
    if path == "chinook":
        return str(chinook_path())
    if not isinstance(path, str) or not path:
        raise ConfigError(f"gateway.workflows.text2sql: database {name!r}: expected a file path, "
                          f"'builtin' or 'chinook', got {path!r}")
    if not Path(path).is_file():
        raise ConfigError(f"gateway.workflows.text2sql: database {name!r}: no file {path!r}")
    return path


def _int(value: Any, name: str, err: type[Exception]) -> int:
    lo, hi = LIMITS[name]
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise err(f"text2sql: {name} must be an integer in [{lo}, {hi}], got {value!r}")
    return value


def prepare(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Resolve, catalogue and index every database once (ConfigError on bad settings)."""
    extra = sorted(set(settings) - set(KNOWN))
    if extra:
        raise ConfigError(f"gateway.workflows.text2sql: unknown field(s) {extra}; known: {list(KNOWN)}")
    dbs = settings.get("databases") or {"bank": "builtin", "chinook": "chinook"}
    notes = settings.get("descriptions") or {}
    if not isinstance(dbs, Mapping) or not isinstance(notes, Mapping):
        raise ConfigError("gateway.workflows.text2sql: databases and descriptions are mappings by database name")
    defaults = AgentConfig()
    numbers = {key: _int(settings[key], key, ConfigError) if key in settings else getattr(defaults, key)
               for key in ("candidates", "max_rounds", "unit_tests", "max_tokens")}
    cleanup: list[str] = []
    catalogs: dict[str, Catalog] = {}
    for name, path in dbs.items():
        user = notes.get(name)
        catalogs[str(name)] = read_catalog(resolve_database(str(name), path, cleanup),
                                           user if isinstance(user, Mapping) else None)
    return {"catalogs": catalogs, "_cleanup": cleanup, **numbers,
            "indexes": EntityIndexes(catalogs.values())}


def build(inputs: Mapping[str, Any], settings: Mapping[str, Any], model: str | None) -> ChessAgent:
    question = inputs.get("question")
    if not isinstance(question, str) or not question.strip():
        raise RequestError("text2sql: input 'question' (a non-empty string) is required")
    catalogs: Mapping[str, Catalog] = settings["catalogs"]
    db = inputs.get("database", next(iter(catalogs)))
    if not isinstance(db, str) or db not in catalogs:
        raise RequestError(f"text2sql: unknown database {db!r}; known: {', '.join(catalogs)}")
    cands = min(_int(inputs.get("candidates", settings["candidates"]), "candidates", RequestError),
                settings["candidates"])
    rounds = min(_int(inputs.get("max_rounds", settings["max_rounds"]), "max_rounds", RequestError),
                 settings["max_rounds"])
    cfg = AgentConfig(cands, rounds, settings["unit_tests"], settings["max_tokens"])
    return ChessAgent(question.strip(), db, catalogs[db], cfg, model)


ToolFn = Callable[[Mapping[str, Any]], Any]


def tools(settings: Mapping[str, Any]) -> dict[str, ToolFn]:
    """The agent's retrieval tools over the prepared catalogs and indexes (the `sql` tool
    is the gateway's own sandboxed executor)."""
    catalogs = {c.path: c for c in settings["catalogs"].values()}
    indexes: EntityIndexes = settings["indexes"]

    def _db(args: Mapping[str, Any]) -> str:
        path = args.get("database")
        if path not in catalogs:
            raise ValueError(f"no prepared database {path!r}")
        return str(path)

    def entity_lookup(args: Mapping[str, Any]) -> str:
        kws = parse_keywords(args.get("keywords") if isinstance(args.get("keywords"), str) else None)
        return render_entities(indexes.get(_db(args)).lookup(kws))

    def context(args: Mapping[str, Any]) -> str:
        kws = parse_keywords(args.get("keywords") if isinstance(args.get("keywords"), str) else None)
        return column_context(catalogs[_db(args)], kws)

    return {"entity_lookup": entity_lookup, "column_context": context}


TEXT2SQL = WorkflowDef("text2sql", "CHESS-style Text-to-SQL agent over SQLite/DuckDB: keywords, entity and "
                       "context retrieval, schema selection, candidates, revision by execution errors, "
                       "unit tests", build, prepare, tools)
