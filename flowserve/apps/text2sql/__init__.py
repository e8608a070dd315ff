"""The CHESS-style Text-to-SQL agent: one noun per module — `catalog` (schema, descriptions,
values), `entities` (MinHash-LSH retrieval), `prompts` (stage prompts and answer parsing),
`agent` (the workflow), `app` (configuration and tools), `bank` (the synthetic demo
database), `modelled` (the simulator's oracle), `record` (published-format traces),
`evaluate` (the accuracy harness)."""

from flowserve.apps.text2sql.app import TEXT2SQL, chinook_path
from flowserve.apps.text2sql.prompts import extract_sql

__all__ = ["TEXT2SQL", "chinook_path", "extract_sql"]
