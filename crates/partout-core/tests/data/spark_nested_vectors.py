"""Spark's own hash of nested keys, written to spark_nested_vectors.json.

Runs PySpark 4 in local mode (session time zone UTC) and records, for every value below,
Spark SQL's `hash(k)` (Murmur3_x86_32, seed 42) and `pmod(hash(k), n)` for each partition
count in PARTITIONS, where `k` is an array, a struct, or a mix of them with decimals, dates and
timestamps inside. It also checks that `df.repartition(n, k)` puts every row in partition
`pmod(hash(k), n)`, both for the vectors themselves and for larger random data sets, and that
Spark refuses to hash a map.

Usage (Java 17 on the PATH):

    python3 -m venv /tmp/spark-venv && /tmp/spark-venv/bin/pip install 'pyspark>=4,<5'
    /tmp/spark-venv/bin/python crates/partout-core/tests/data/spark_nested_vectors.py

Each vector's value is given here as Python data and written to the JSON in an exact encoding
(see README.md). Before hashing, every value is read back from Spark and compared with the
input, so the JSON describes exactly what Spark hashed.
"""

import datetime as dt
import decimal
import json
import math
import os
import random
import time
from decimal import Decimal
from pathlib import Path

# 38-digit decimals need more than the default 28 significant digits.
decimal.getcontext().prec = 80

# Collected timestamps come back in the Python process's local zone: make that UTC too.
os.environ["TZ"] = "UTC"
time.tzset()

import pyspark  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql import types as T  # noqa: E402

OUT = Path(__file__).with_name("spark_nested_vectors.json")
PARTITIONS = [7, 200]
UTC = dt.timezone.utc


def ts(text):
    """A UTC timestamp from `yyyy-mm-ddTHH:MM:SS.ffffff`."""
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC)


def ntz(text):
    """A timestamp without time zone from `yyyy-mm-ddTHH:MM:SS.ffffff`."""
    return dt.datetime.fromisoformat(text)


def date(text):
    return dt.date.fromisoformat(text)


def d(text):
    """A decimal; quantized to its column's scale when the DataFrame is built."""
    return Decimal(text)


NAN, INF = float("nan"), float("inf")

# Each case: the key columns' Spark types (DDL) and the rows, one tuple of key values per
# vector. Struct values are dicts keyed by field name.
CASES = [
    (["array<int>"], [
        ([],), ([0],), ([1],), ([1, 2, 3],), ([3, 2, 1],), ([None],), ([1, None, 3],),
        ([None, None],), ([-2147483648, 2147483647],), (None,),
    ]),
    (["array<bigint>"], [
        ([],), ([1],), ([1, -1, 9223372036854775807],), ([None, 42],),
        ([-9223372036854775808],), (None,),
    ]),
    (["array<string>"], [
        ([],), ([""],), (["a"],), (["hello", "world"],), ([None, "x"],),
        (["é漢字🙂", "abcd", "abcde", "abcdefg"],), (None,),
    ]),
    (["array<double>"], [
        ([],), ([0.0],), ([-0.0],), ([1.5, None, -2.25],), ([NAN, INF, -INF],),
        ([1e-300, 1.7976931348623157e308, 5e-324],), (None,),
    ]),
    (["array<float>"], [([1.5, -0.0, None],), ([NAN, -INF, 3.25],), ([],)]),
    (["array<boolean>"], [([True, False, None],), ([False],)]),
    (["array<tinyint>"], [([-128, 0, 127, None],)]),
    (["array<smallint>"], [([-32768, 1, 32767],)]),
    (["array<binary>"], [
        ([b"", b"\x01", b"\xde\xad\xbe\xef\x01", None],), ([b"abc", None, b"\xff\x00\x80"],),
        (None,),
    ]),
    (["struct<a:int,b:string>"], [
        ({"a": 1, "b": "x"},), ({"a": None, "b": "x"},), ({"a": 1, "b": None},),
        ({"a": None, "b": None},), (None,), ({"a": -1, "b": ""},),
    ]),
    (["struct<a:bigint,b:double,c:boolean,d:string>"], [
        ({"a": 7, "b": -0.0, "c": True, "d": "seven"},),
        ({"a": None, "b": NAN, "c": False, "d": None},),
        ({"a": -9223372036854775808, "b": None, "c": None, "d": "z"},),
        (None,),
    ]),
    (["struct<x:struct<y:int,z:string>,w:bigint>"], [
        ({"x": {"y": 1, "z": "in"}, "w": 2},), ({"x": None, "w": 2},),
        ({"x": {"y": None, "z": None}, "w": None},), (None,),
    ]),
    (["array<struct<a:int,b:string>>"], [
        ([],), ([{"a": 1, "b": "a"}],), ([{"a": 1, "b": "a"}, None, {"a": None, "b": "b"}],),
        ([{"a": None, "b": None}],), ([None],), (None,),
    ]),
    (["struct<a:array<int>,b:string>"], [
        ({"a": [1, 2], "b": "x"},), ({"a": [], "b": "x"},), ({"a": None, "b": "x"},),
        ({"a": [None], "b": None},), (None,),
    ]),
    (["struct<tags:array<string>,scores:array<double>>"], [
        ({"tags": ["a", None, "bc"], "scores": [0.5, -0.0]},),
        ({"tags": [], "scores": None},),
    ]),
    (["array<array<int>>"], [
        ([],), ([[]],), ([[1, 2], [3]],), ([[1], [2, 3]],), ([None, [1], [None]],),
        ([[], [], [7]],), (None,),
    ]),
    (["array<array<string>>"], [([["a", "b"], None, ["c"]],), ([[None, ""]],)]),
    (["array<decimal(10,2)>"], [
        ([d("1.23"), d("-0.01"), None],), ([d("99999999.99"), d("-99999999.99")],), ([],),
        (None,),
    ]),
    (["array<decimal(18,18)>"], [([d("0.123456789012345678"), d("-0.999999999999999999")],)]),
    (["array<decimal(19,0)>"], [([d("0"), d("9223372036854775807"), d("-9999999999999999999")],)]),
    (["array<decimal(20,0)>"], [
        ([d("127"), d("128"), d("-128"), d("-129")],),
        ([d("9223372036854775808"), d("-9223372036854775809"), d("0"), d("-1")],),
    ]),
    (["array<decimal(38,10)>"], [
        ([d("0"), d("1.5"), d("-1")],),
        ([d("9999999999999999999999999999.9999999999")],),
        ([d("-9999999999999999999999999999.9999999999"), None],),
        ([None],), (None,),
    ]),
    (["struct<p:decimal(5,2),q:decimal(30,5)>"], [
        ({"p": d("1.00"), "q": d("1234567890123456789012345.12345")},),
        ({"p": None, "q": d("-1.00000")},), ({"p": d("-999.99"), "q": None},), (None,),
    ]),
    (["array<timestamp>"], [
        ([ts("1970-01-01T00:00:00"), ts("2024-02-29T12:34:56.789012"), None],),
        ([ts("1969-12-31T23:59:59.999999")],),
        ([ts("1900-01-01T00:00:00.000001"), ts("9999-12-31T23:59:59.999999")],),
        ([],), (None,),
    ]),
    (["array<timestamp_ntz>"], [
        ([ntz("2001-09-09T01:46:40"), None, ntz("1960-06-15T08:00:00.5")],),
    ]),
    (["array<date>"], [
        ([date("1970-01-01"), date("2024-02-29"), None],), ([date("0001-01-01"), date("9999-12-31")],),
        ([date("1969-12-31")],),
    ]),
    (["struct<t:timestamp,d:date,n:timestamp_ntz>"], [
        ({"t": ts("2020-01-01T00:00:00.123456"), "d": date("2020-01-01"), "n": ntz("2020-01-01T00:00:00")},),
        ({"t": None, "d": date("1850-03-04"), "n": None},),
        ({"t": ts("1950-07-08T09:10:11"), "d": None, "n": ntz("2100-01-01T00:00:00.000001")},),
        (None,),
    ]),
    (["array<struct<t:timestamp,amount:decimal(12,2)>>"], [
        ([{"t": ts("2023-05-06T07:08:09.101112"), "amount": d("12.50")}, None,
          {"t": None, "amount": d("-0.01")}],),
        ([{"t": ts("1970-01-01T00:00:00.000001"), "amount": None}],),
    ]),
    (["struct<e:array<decimal(25,3)>,f:array<date>>"], [
        ({"e": [d("1.000"), None, d("-1234567890123456789012.345")], "f": [date("2000-02-29")]},),
    ]),
    (["struct<deep:array<array<bigint>>,m:struct<k:string>>"], [
        ({"deep": [[1, 2], [], None, [3]], "m": {"k": "v"}},),
        ({"deep": [], "m": {"k": None}},),
        ({"deep": None, "m": None},),
    ]),
    (["array<int>", "bigint"], [
        ([1, 2], 7), (None, 7), ([1, 2], None), ([], 0), ([None], -1),
    ]),
    (["struct<a:int,b:string>", "string"], [
        ({"a": 1, "b": "x"}, "y"), (None, "y"), ({"a": None, "b": None}, None),
    ]),
    (["string", "array<struct<a:int,b:string>>", "int"], [
        ("k", [{"a": 1, "b": "a"}], 3), (None, None, None), ("", [None, {"a": 2, "b": None}], None),
    ]),
    (["date", "array<decimal(38,10)>"], [
        (date("2024-01-01"), [d("0.0000000001")]), (None, [d("1"), None]),
    ]),
]

# Shapes of the larger random data sets on which `df.repartition` is held to pmod(hash).
REPARTITION_SHAPES = [
    "array<int>",
    "struct<a:int,b:string>",
    "array<struct<a:bigint,b:string>>",
    "struct<a:array<decimal(38,10)>,t:timestamp>",
]
REPARTITION_ROWS = 5000


def quantize(data_type, value):
    """The value with every decimal at its column's scale (as Spark would store it)."""
    if value is None:
        return None
    if isinstance(data_type, T.ArrayType):
        return [quantize(data_type.elementType, v) for v in value]
    if isinstance(data_type, T.StructType):
        return {f.name: quantize(f.dataType, value[f.name]) for f in data_type.fields}
    if isinstance(data_type, T.DecimalType):
        return value.quantize(Decimal(1).scaleb(-data_type.scale))
    return value


def to_spark(data_type, value):
    """The value as createDataFrame takes it: structs as tuples in field order."""
    if value is None:
        return None
    if isinstance(data_type, T.ArrayType):
        return [to_spark(data_type.elementType, v) for v in value]
    if isinstance(data_type, T.StructType):
        return tuple(to_spark(f.dataType, value[f.name]) for f in data_type.fields)
    return value


def encode(data_type, value):
    """The value in the JSON file's exact encoding (see README.md)."""
    if value is None:
        return None
    if isinstance(data_type, T.ArrayType):
        return [encode(data_type.elementType, v) for v in value]
    if isinstance(data_type, T.StructType):
        return {f.name: encode(f.dataType, value[f.name]) for f in data_type.fields}
    if isinstance(data_type, T.DecimalType):
        return format(value, "f")
    if isinstance(data_type, (T.FloatType, T.DoubleType)):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(float(value))
    if isinstance(data_type, T.TimestampNTZType):
        return value.isoformat(timespec="microseconds")
    if isinstance(data_type, T.TimestampType):
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value.isoformat(timespec="microseconds") + "Z"
    if isinstance(data_type, T.DateType):
        return value.isoformat()
    if isinstance(data_type, T.BinaryType):
        return "0x" + bytes(value).hex()
    if isinstance(data_type, (T.StringType, T.BooleanType, T.ByteType, T.ShortType,
                              T.IntegerType, T.LongType)):
        return value
    raise TypeError(f"no encoding for {data_type}")


def key_schema(types):
    parsed = [T._parse_datatype_string(t) for t in types]
    fields = [T.StructField("id", T.IntegerType(), False)]
    fields += [T.StructField(f"k{i}", t, True) for i, t in enumerate(parsed)]
    return parsed, T.StructType(fields)


def hash_columns(df, names):
    """id, hash(keys) and pmod(hash(keys), n) for every n in PARTITIONS."""
    h = F.hash(*[F.col(n) for n in names])
    cols = [F.col("id"), h.alias("hash")]
    cols += [F.pmod(h, F.lit(n)).alias(f"pmod{n}") for n in PARTITIONS]
    return df.select(*cols)


def misplaced_rows(df, names, n):
    """Rows that `repartition(n, keys)` put outside partition pmod(hash(keys), n)."""
    placed = df.repartition(n, *names).select(
        F.spark_partition_id().alias("p"),
        F.pmod(F.hash(*[F.col(c) for c in names]), F.lit(n)).alias("want"),
    )
    misplaced = placed.filter(F.col("p") != F.col("want")).count()
    used = placed.select("p").distinct().count()
    return misplaced, used


def random_value(data_type, rng, depth=0):
    """A random value of `data_type`, null one time in eight."""
    if rng.random() < 0.125:
        return None
    if isinstance(data_type, T.ArrayType):
        return [random_value(data_type.elementType, rng, depth + 1) for _ in range(rng.randrange(4))]
    if isinstance(data_type, T.StructType):
        return {f.name: random_value(f.dataType, rng, depth + 1) for f in data_type.fields}
    if isinstance(data_type, T.IntegerType):
        return rng.randrange(-2**31, 2**31)
    if isinstance(data_type, T.LongType):
        return rng.randrange(-2**63, 2**63)
    if isinstance(data_type, T.StringType):
        return "".join(rng.choice("abcé漢🙂") for _ in range(rng.randrange(9)))
    if isinstance(data_type, T.DecimalType):
        digits = rng.randrange(1, data_type.precision + 1)
        unscaled = rng.randrange(-10**digits + 1, 10**digits)
        return Decimal(unscaled).scaleb(-data_type.scale)
    if isinstance(data_type, T.TimestampType):
        return dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(
            microseconds=rng.randrange(-2**50, 2**50))
    raise TypeError(f"no random {data_type}")


def main():
    spark = (
        SparkSession.builder.master("local[4]")
        .appName("spark_nested_vectors")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")

    vectors, repartition = [], []
    for types, rows in CASES:
        parsed, schema = key_schema(types)
        names = [f"k{i}" for i in range(len(types))]
        rows = [tuple(quantize(t, v) for t, v in zip(parsed, row)) for row in rows]
        df = spark.createDataFrame(
            [(i, *[to_spark(t, v) for t, v in zip(parsed, row)]) for i, row in enumerate(rows)],
            schema,
        )
        # What Spark holds must be what the JSON will say. (Decimals are read back through
        # Java's BigDecimal.toString, which may write 1E-10 at scale 10 as 1.00E-10: their
        # scale is the column's, so compare them at that scale.)
        for back in df.orderBy("id").collect():
            row = rows[back["id"]]
            for t, name, want in zip(parsed, names, row):
                got, want = encode(t, quantize(t, back[name])), encode(t, want)
                assert got == want, f"{types}: Spark holds {got}, not {want}"
        hashed = {r["id"]: r for r in hash_columns(df, names).collect()}
        # Each vector's row placed by Spark's own shuffle, not only by the pmod expression.
        for n in PARTITIONS:
            misplaced, _ = misplaced_rows(df, names, n)
            assert misplaced == 0, f"{types}: {misplaced} rows outside pmod(hash, {n})"
        for i, row in enumerate(rows):
            r = hashed[i]
            vectors.append({
                "types": types,
                "values": [encode(t, v) for t, v in zip(parsed, row)],
                "hash": r["hash"],
                "pmod": {str(n): r[f"pmod{n}"] for n in PARTITIONS},
            })

    rng = random.Random(42)
    for shape in REPARTITION_SHAPES:
        parsed, schema = key_schema([shape])
        data = [(i, to_spark(parsed[0], random_value(parsed[0], rng)))
                for i in range(REPARTITION_ROWS)]
        df = spark.createDataFrame(data, schema)
        for n in PARTITIONS:
            misplaced, used = misplaced_rows(df, ["k0"], n)
            assert misplaced == 0, f"{shape}: {misplaced} rows outside pmod(hash, {n})"
            repartition.append({
                "key": shape, "partitions": n, "rows": REPARTITION_ROWS,
                "rows_not_in_pmod_hash_partition": misplaced, "partitions_used": used,
            })

    # Spark has no hash for maps unless a legacy flag is set; partout has none either.
    try:
        spark.sql("SELECT hash(map(1, 2))").collect()
        map_refused = None
    except Exception as err:  # AnalysisException; its class moved between releases
        map_refused = getattr(err, "getCondition", lambda: None)() or type(err).__name__

    out = {
        "spark_version": spark.version,
        "pyspark_version": pyspark.__version__,
        "session_time_zone": spark.conf.get("spark.sql.session.timeZone"),
        "seed": 42,
        "partitions": PARTITIONS,
        "map_hash_refused": map_refused,
        "repartition_check": repartition,
        "vectors": vectors,
    }
    text = json.dumps(out, indent=1, ensure_ascii=False)
    # One vector per line keeps the file readable and its diffs small.
    lines = [json.dumps(v, ensure_ascii=False) for v in vectors]
    head = text[: text.index('"vectors"')]
    OUT.write_text(head + '"vectors": [\n  ' + ",\n  ".join(lines) + "\n ]\n}\n", encoding="utf-8")
    # The file must still be valid JSON holding the same data.
    assert json.loads(OUT.read_text(encoding="utf-8")) == json.loads(text)
    print(f"{len(vectors)} vectors, {len(repartition)} repartition checks -> {OUT}")
    spark.stop()


if __name__ == "__main__":
    main()
