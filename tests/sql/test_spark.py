"""Spark through mapInArrow on local[2] (one session for the module; Java 17 needed)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

pyspark = pytest.importorskip("pyspark")
pytestmark = pytest.mark.real_engine  # starts Spark: a JVM and its Python workers
if shutil.which("java") is None:
    pytest.skip("no java on PATH: Spark needs a Java runtime (Debian's package openjdk-17-jre-headless: "
                "apt-get install -y openjdk-17-jre-headless)", allow_module_level=True)

from pyspark.sql import SparkSession  # noqa: E402

from flowserve.sql.errors import SQLInputError  # noqa: E402
from flowserve.sql.spark import llm_column, register  # noqa: E402


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    s = (SparkSession.builder.master("local[2]").appName("flowserve-sql-test")
         .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
         .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
    yield s
    s.stop()


def test_llm_column_keeps_rows_and_order_and_nulls(spark: SparkSession) -> None:
    rows = [(i, f"info {i % 2} " + "word " * 10, None if i == 3 else f"review {i}") for i in range(8)]
    df = spark.createDataFrame(rows, "id int, info string, review string").repartition(2)
    out = llm_column(df, "Kids? {info} {review}", ["info", "review"], "kids", kind="bool", cluster="paper-l4")
    got = {r["id"]: (r["kids"], r["kids_error"]) for r in out.collect()}
    assert sorted(got) == list(range(8))
    assert got[3] == (None, "NULL in field 'review'")
    assert all(isinstance(got[i][0], bool) and got[i][1] is None for i in got if i != 3)
    with pytest.raises(SQLInputError, match="unknown column"):
        llm_column(df, "Kids? {x}", ["nope"], "k", cluster="paper-l4")


def test_llm_functions_in_spark_sql_text(spark: SparkSession) -> None:
    """`spark.sql("SELECT ... LLM(...) ... FROM t")`: each Arrow batch is one planned batch."""
    register(spark, cluster="paper-l4")
    rows = [(i, f"info {i % 2} " + "word " * 10, None if i == 3 else f"review {i}") for i in range(8)]
    spark.createDataFrame(rows, "id int, info string, review string").repartition(2).createOrReplaceTempView("films")
    out = spark.sql("SELECT id, LLM_FILTER('Kids? {info} {review}', info, review) AS kids, "
                    "LLM_CHOICE('Good|Bad', 'Verdict', review) AS v, LLM_NUMBER('Score', info) AS n, "
                    "LLM('Sum up', info, review) AS s FROM films").collect()
    got = {r["id"]: r for r in out}
    assert sorted(got) == list(range(8))
    assert got[3]["kids"] is None and got[3]["v"] is None and got[3]["s"] is None  # NULL review: no call
    assert all(isinstance(got[i]["kids"], bool) and got[i]["v"] in ("Good", "Bad") and isinstance(got[i]["s"], str)
               for i in got if i != 3)
    assert all(0 <= got[i]["n"] <= 5 for i in got)
