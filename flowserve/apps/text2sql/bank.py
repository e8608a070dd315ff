"""A small deterministic SQLite database (a bank, after BIRD's `financial`) for the live
Text-to-SQL workflow when no database is configured."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

SCHEMA = """
CREATE TABLE district (
  district_id INTEGER PRIMARY KEY, name TEXT NOT NULL, region TEXT NOT NULL,
  inhabitants INTEGER NOT NULL, average_salary INTEGER NOT NULL
);
CREATE TABLE client (
  client_id INTEGER PRIMARY KEY, gender TEXT CHECK (gender IN ('F', 'M')),
  birth_date TEXT NOT NULL, district_id INTEGER REFERENCES district(district_id)
);
CREATE TABLE account (
  account_id INTEGER PRIMARY KEY, district_id INTEGER REFERENCES district(district_id),
  frequency TEXT NOT NULL, date TEXT NOT NULL
);
CREATE TABLE disp (
  disp_id INTEGER PRIMARY KEY, client_id INTEGER REFERENCES client(client_id),
  account_id INTEGER REFERENCES account(account_id), type TEXT NOT NULL
);
CREATE TABLE loan (
  loan_id INTEGER PRIMARY KEY, account_id INTEGER REFERENCES account(account_id),
  date TEXT NOT NULL, amount INTEGER NOT NULL, duration INTEGER NOT NULL, status TEXT NOT NULL
);
CREATE TABLE trans (
  trans_id INTEGER PRIMARY KEY, account_id INTEGER REFERENCES account(account_id),
  date TEXT NOT NULL, type TEXT NOT NULL, amount INTEGER NOT NULL, balance INTEGER NOT NULL
);
"""

REGIONS = ("Prague", "central Bohemia", "south Bohemia", "west Bohemia", "north Moravia")


def create_demo_db(path: str | Path, seed: int = 7) -> Path:
    """Write the demo database to `path` (replacing it); same seed, same rows."""
    path = Path(path)
    path.unlink(missing_ok=True)
    rng = random.Random(seed)
    con = sqlite3.connect(path)
    try:
        con.executescript(SCHEMA)
        con.executemany("INSERT INTO district VALUES (?, ?, ?, ?, ?)", [
            (d, f"District {d}", REGIONS[d % len(REGIONS)], rng.randint(40_000, 1_200_000),
             rng.randint(8_000, 13_000)) for d in range(1, 21)])
        con.executemany("INSERT INTO client VALUES (?, ?, ?, ?)", [
            (c, rng.choice("FM"), f"19{rng.randint(30, 89)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
             rng.randint(1, 20)) for c in range(1, 201)])
        con.executemany("INSERT INTO account VALUES (?, ?, ?, ?)", [
            (a, rng.randint(1, 20), rng.choice(("monthly", "weekly", "after transaction")),
             f"199{rng.randint(3, 7)}-{rng.randint(1, 12):02d}-01") for a in range(1, 151)])
        con.executemany("INSERT INTO disp VALUES (?, ?, ?, ?)", [
            (d, d, (d - 1) % 150 + 1, "OWNER" if d <= 150 else "DISPONENT") for d in range(1, 201)])
        con.executemany("INSERT INTO loan VALUES (?, ?, ?, ?, ?, ?)", [
            (n, rng.randint(1, 150), f"199{rng.randint(4, 8)}-{rng.randint(1, 12):02d}-15",
             rng.randint(5, 60) * 1000, rng.choice((12, 24, 36, 48, 60)), rng.choice("ABCD"))
            for n in range(1, 61)])
        con.executemany("INSERT INTO trans VALUES (?, ?, ?, ?, ?, ?)", [
            (t, rng.randint(1, 150), f"199{rng.randint(3, 8)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
             rng.choice(("PRIJEM", "VYDAJ")), rng.randint(1, 500) * 100, rng.randint(0, 2000) * 100)
            for t in range(1, 1001)])
        con.commit()
    finally:
        con.close()
    return path
