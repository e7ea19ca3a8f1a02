"""Every Arrow type a user's file can hold goes through `partout repartition` and comes back
as pyarrow wrote it: primitives, decimals 32 to 256, views, dictionaries, intervals, nested
types, maps, sparse and dense unions, run-end encoded columns, list views, extension types and
custom metadata. Each type's column is written by pyarrow as an Arrow IPC stream under a name
that says nothing of its format, repartitioned into 3 destinations by round-robin and by the
fast hash of that column (IPC out), and read back with pyarrow: every row once, values and
types as written, equal keys in one destination. Parquet output takes what Parquet can hold
and refuses the rest by name; Spark's hash and range partitioning take the keys they can and
refuse the rest by name. A refusal is exit code 2 and one line, never a crash.

Where each row goes is checked against a reference, not only that it went somewhere: Spark's
scheme against Spark's Murmur3 computed here in pure Python (itself checked against PySpark's
own vectors); range partitioning against each type's order (every key of a destination at most
every key of the next, nulls first); partout's own hash, which has no outside reference, by how
evenly it spreads thousands of distinct keys of each type."""
import collections
import csv
import datetime
import decimal
import json
import math
import os
import pathlib
import struct
import subprocess
import uuid

import pyarrow as pa
import pyarrow.ipc
import pyarrow.parquet as pq
import pytest

PARTOUT = pathlib.Path(os.environ.get("PARTOUT_BIN", "target/release/partout"))
SPARK_VECTORS = (pathlib.Path(__file__).resolve().parents[2]
                 / "crates/partout-core/tests/data/spark_hash_vectors.csv")
ROWS = 257
N = 3


class Celsius(pa.ExtensionType):
    """A user's own extension type: an int16 storage under a name pyarrow registers."""

    def __init__(self):
        super().__init__(pa.int16(), "partout.test.celsius")

    def __arrow_ext_serialize__(self):
        return b"unit=C"

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type, serialized):
        assert serialized == b"unit=C"
        return cls()


pa.register_extension_type(Celsius())


def nulls_every(k, values):
    return [None if i % k == k - 1 else v for i, v in enumerate(values)]


def runs(values, type_=None):
    """Run-end encoded values: runs of 1 to 5 rows, some 20, with null runs."""
    ends, run_values, end, i = [], [], 0, 0
    while end < ROWS:
        end = min(ROWS, end + (20 if i % 7 == 3 else 1 + (i * 3) % 5))
        ends.append(end)
        run_values.append(values[i % len(values)])
        i += 1
    return ends, pa.array(run_values, type_)


def ree(run_end_type, values, type_=None):
    ends, run_values = runs(values, type_)
    return pa.RunEndEncodedArray.from_arrays(pa.array(ends, run_end_type), run_values)


def list_view(large):
    """Views of overlapping, out-of-order ranges of one child, some empty, some null."""
    child = pa.array(nulls_every(6, [f"v{i}" for i in range(40)]), pa.string())
    offsets = [(i * 7) % 37 for i in range(ROWS)]
    sizes = [i % 4 for i in range(ROWS)]
    mask = pa.array([i % 9 == 4 for i in range(ROWS)])
    make = pa.LargeListViewArray if large else pa.ListViewArray
    offset_type = pa.int64() if large else pa.int32()
    return make.from_arrays(pa.array(offsets, offset_type), pa.array(sizes, offset_type), child,
                            mask=mask)


def dense_union():
    ints = pa.array(nulls_every(5, [i * 3 for i in range(400)]), pa.int64())
    strings = pa.array([f"s{i}" for i in range(200)], pa.string())
    children = [0 if i % 3 else 1 for i in range(ROWS)]
    counters = [0, 0]
    offsets = []
    for c in children:
        offsets.append(counters[c])
        counters[c] += 1 + (c == 0)  # children longer than the rows need, offsets in order
    codes = [2, 7]
    return pa.UnionArray.from_dense(pa.array([codes[c] for c in children], pa.int8()),
                                    pa.array(offsets, pa.int32()), [ints, strings], ["i", "s"],
                                    codes)


def sparse_union():
    ints = pa.array(nulls_every(4, range(ROWS)), pa.int32())
    strings = pa.array([f"t{i}" for i in range(ROWS)], pa.string())
    return pa.UnionArray.from_sparse(pa.array([i % 2 for i in range(ROWS)], pa.int8()),
                                     [ints, strings], ["i", "s"])


def columns():
    """name -> array, ROWS rows each, nulls in every one that can hold them."""
    r = range(ROWS)
    ints = list(r)
    texts = [f"text {i}" + "x" * (i % 17) for i in r]
    cols = {
        "null": pa.nulls(ROWS),
        "bool": pa.array(nulls_every(5, [i % 3 == 0 for i in r])),
        "int8": pa.array(nulls_every(7, [i % 100 - 50 for i in r]), pa.int8()),
        "int16": pa.array(nulls_every(7, [i * 31 - 4000 for i in r]), pa.int16()),
        "int32": pa.array(nulls_every(7, [i * 7919 for i in r]), pa.int32()),
        "int64": pa.array(nulls_every(7, [i * 2**40 for i in r]), pa.int64()),
        "uint8": pa.array(nulls_every(7, [i % 256 for i in r]), pa.uint8()),
        "uint16": pa.array(nulls_every(7, ints), pa.uint16()),
        "uint32": pa.array(nulls_every(7, [i * 16_000_000 for i in r]), pa.uint32()),
        "uint64": pa.array(nulls_every(7, [i * 2**50 for i in r]), pa.uint64()),
        "float16": pa.array(nulls_every(7, [i / 4 for i in r]), pa.float16()),
        "float32": pa.array(nulls_every(7, [i / 8 for i in r]), pa.float32()),
        "float64": pa.array(nulls_every(7, [i / 3 for i in r]), pa.float64()),
        "decimal32": pa.array(nulls_every(7, [decimal.Decimal(i) / 100 for i in r]),
                              pa.decimal32(9, 2)),
        "decimal64": pa.array(nulls_every(7, [decimal.Decimal(i * 1237) / 1000 for i in r]),
                              pa.decimal64(18, 3)),
        "decimal128": pa.array(nulls_every(7, [decimal.Decimal(i) ** 5 for i in r]),
                               pa.decimal128(38, 0)),
        "decimal256": pa.array(nulls_every(7, [decimal.Decimal(i) ** 9 for i in r]),
                               pa.decimal256(76, 0)),
        "date32": pa.array(nulls_every(7, [datetime.date(2020, 1, 1) +
                                           datetime.timedelta(days=i) for i in r])),
        "date64": pa.array(nulls_every(7, [i * 86_400_000 for i in r]), pa.date64()),
        "time32": pa.array(nulls_every(7, [i * 61 for i in r]), pa.time32("s")),
        "time64": pa.array(nulls_every(7, [i * 1_000_123 for i in r]), pa.time64("ns")),
        "timestamp": pa.array(nulls_every(7, [i * 10**9 for i in r]), pa.timestamp("ns")),
        "timestamp_tz": pa.array(nulls_every(7, [i * 10**6 for i in r]),
                                 pa.timestamp("us", tz="Europe/Paris")),
        "duration": pa.array(nulls_every(7, [i * 1000 for i in r]), pa.duration("ms")),
        "interval": pa.array(nulls_every(7, [pa.MonthDayNano([i, -i, i * 10])
                                             for i in r]), pa.month_day_nano_interval()),
        "string": pa.array(nulls_every(7, texts), pa.string()),
        "large_string": pa.array(nulls_every(7, texts), pa.large_string()),
        "string_view": pa.array(nulls_every(7, texts), pa.string_view()),
        "binary": pa.array(nulls_every(7, [t.encode() for t in texts]), pa.binary()),
        "large_binary": pa.array(nulls_every(7, [t.encode() for t in texts]),
                                 pa.large_binary()),
        "binary_view": pa.array(nulls_every(7, [t.encode() for t in texts]),
                                pa.binary_view()),
        "fixed_binary": pa.array(nulls_every(7, [i.to_bytes(4, "little") for i in r]),
                                 pa.binary(4)),
        "dictionary": pa.array(nulls_every(7, [f"d{i % 9}" for i in r]),
                               pa.dictionary(pa.int16(), pa.string())),
        "list": pa.array(nulls_every(7, [list(range(i % 5)) for i in r]), pa.list_(pa.int32())),
        "large_list": pa.array(nulls_every(7, [[f"e{j}" for j in range(i % 4)] for i in r]),
                               pa.large_list(pa.string())),
        "fixed_list": pa.array(nulls_every(7, [[i, None, -i] for i in r]),
                               pa.list_(pa.int64(), 3)),
        "list_view": list_view(False),
        "large_list_view": list_view(True),
        "struct": pa.array(nulls_every(7, [{"a": i, "b": None if i % 5 == 0 else f"b{i}"}
                                           for i in r]),
                           pa.struct([("a", pa.int32()), ("b", pa.string())])),
        "map": pa.array(nulls_every(7, [[(f"k{j}", i * j) for j in range(i % 3)] for i in r]),
                        pa.map_(pa.string(), pa.int64())),
        "sparse_union": sparse_union(),
        "dense_union": dense_union(),
        "ree_int16_string": ree(pa.int16(), ["a", None, "a longer value than twelve", "b"]),
        "ree_int32_int64": ree(pa.int32(), [1, 2, None, 2**40]),
        "ree_int64_list": ree(pa.int64(), [[1, 2], [], None, [3]], pa.list_(pa.int32())),
        "uuid": pa.ExtensionArray.from_storage(
            pa.uuid(), pa.array(nulls_every(7, [uuid.UUID(int=i * 7919).bytes for i in r]),
                                pa.binary(16))),
        "celsius": pa.ExtensionArray.from_storage(
            Celsius(), pa.array(nulls_every(7, [i - 100 for i in r]), pa.int16())),
    }
    for name, array in cols.items():
        assert len(array) == ROWS, name
        array.validate(full=True)
    return cols


COLUMNS = columns()
METADATA = {b"origin": b"partout every-type test", b"rows": str(ROWS).encode()}


def input_table(name, column=None):
    """The column `name` (of COLUMNS unless given) after a `row` column numbering the rows."""
    column = COLUMNS[name] if column is None else column
    field = pa.field(name, column.type, metadata={b"note": f"column {name}".encode()})
    schema = pa.schema([pa.field("row", pa.int64(), nullable=False), field], metadata=METADATA)
    return pa.Table.from_arrays([pa.array(range(len(column)), pa.int64()), column],
                                schema=schema)


def write_stream(table, path):
    # In two batches, so a destination gets rows of both.
    with pa.ipc.new_stream(path, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=table.num_rows // 2 + 1):
            writer.write_batch(batch)


def repartition(*args):
    return subprocess.run([str(PARTOUT), "repartition", "--quiet", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def assert_refused(result, *words):
    """Exit code 2 and one line naming the problem: no crash, no trace."""
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "panicked" not in result.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])


def read_ipc_outputs(out):
    files = sorted(out.glob("*.arrows"))
    assert len(files) == N, files
    return [pa.ipc.open_stream(f).read_all() for f in files]


def key(value):
    return repr(value)


def pylist(column):
    """Python values; nanosecond times of day as integers (Python's time has microseconds)."""
    if pa.types.is_time64(column.type) and column.type.unit == "ns":
        column = column.cast(pa.int64())
    return column.to_pylist()


def check_outputs(name, tables, by_key):
    """Every row once with the value and type written; with `by_key`, equal keys together."""
    table = input_table(name)
    want = dict(zip(table.column("row").to_pylist(), pylist(table.column(name))))
    seen = {}
    destination_of_key = {}
    for p, t in enumerate(tables):
        assert t.schema.field(name).type == table.schema.field(name).type, name
        assert t.schema.field(name).metadata == table.schema.field(name).metadata, name
        assert t.schema.metadata == METADATA
        for row, value in zip(t.column("row").to_pylist(), pylist(t.column(name))):
            assert row not in seen, f"row {row} twice"
            seen[row] = value
            if by_key:
                assert destination_of_key.setdefault(key(value), p) == p, (row, value)
    assert seen.keys() == want.keys(), f"{len(seen)} of {len(want)} rows"
    for row, value in want.items():
        assert seen[row] == value, (row, seen[row], value)
    return seen


def destinations(tables):
    """Each row's destination, in row order (rows numbered by their `row` column)."""
    got = {row: p for p, t in enumerate(tables) for row in t.column("row").to_pylist()}
    assert sorted(got) == list(range(len(got))), "rows missing"
    return [got[row] for row in range(len(got))]


# Spark's Murmur3_x86_32 (seed 42) and HashExpression's rules, a second implementation in pure
# Python, checked against PySpark's own `hash()` vectors below
# (test_the_spark_reference_is_sparks_own_hash). The vectors cover Spark's scalar types and
# chaining over columns; arrays and structs follow HashExpression's chaining over elements and
# fields, and the Arrow types Spark lacks the Spark type Spark reads them as (spark_hash).
SPARK_SEED = 42
M32 = 0xFFFF_FFFF


def _rotl(x, r):
    return ((x << r) | (x >> (32 - r))) & M32


def _mix_k1(k):
    return (_rotl((k * 0xCC9E_2D51) & M32, 15) * 0x1B87_3593) & M32


def _mix_h1(h, k):
    return (_rotl(h ^ k, 13) * 5 + 0xE654_6B64) & M32


def _fmix(h, length):
    h ^= length
    h ^= h >> 16
    h = (h * 0x85EB_CA6B) & M32
    h ^= h >> 13
    h = (h * 0xC2B2_AE35) & M32
    return h ^ (h >> 16)


def hash_int(value, seed):
    return _fmix(_mix_h1(seed, _mix_k1(value & M32)), 4)


def hash_long(value, seed):
    value &= (1 << 64) - 1
    return _fmix(_mix_h1(_mix_h1(seed, _mix_k1(value & M32)), _mix_k1(value >> 32)), 8)


def hash_unsafe_bytes(data, seed):
    """Spark's hashUnsafeBytes: little-endian 4-byte words, then each tail byte on its own,
    sign-extended (not the standard Murmur3 tail)."""
    h, aligned = seed, len(data) - len(data) % 4
    for i in range(0, aligned, 4):
        h = _mix_h1(h, _mix_k1(int.from_bytes(data[i:i + 4], "little")))
    for byte in data[aligned:]:
        h = _mix_h1(h, _mix_k1((byte - 256 if byte > 127 else byte) & M32))
    return _fmix(h, len(data))


def float_bits(value):
    """Java's floatToIntBits after Spark's -0.0 -> 0.0 (every NaN the canonical one)."""
    if value != value:
        return 0x7FC0_0000
    return struct.unpack("<i", struct.pack("<f", value or 0.0))[0]


def double_bits(value):
    if value != value:
        return 0x7FF8_0000_0000_0000
    return struct.unpack("<q", struct.pack("<d", value or 0.0))[0]


def unscaled(value, scale):
    """A decimal's unscaled integer at `scale`, exactly."""
    sign, digits, exponent = value.as_tuple()
    n = int("".join(map(str, digits)) or "0")
    shift = exponent + scale
    n = n * 10 ** shift if shift >= 0 else n // 10 ** -shift
    return -n if sign else n


def java_big_integer_bytes(n):
    """Java's BigInteger.toByteArray(): minimal big-endian two's complement."""
    bits = (n if n >= 0 else ~n).bit_length()
    return n.to_bytes(bits // 8 + 1, "big", signed=True)


MICROS = {"s": (1_000_000, 1), "ms": (1_000, 1), "us": (1, 1), "ns": (1, 1_000)}


def spark_hash(type_, value, seed=SPARK_SEED):
    """Spark's hash of one value of an Arrow type, as the Spark type Spark reads it as: bytes,
    shorts and ints (unsigned bytes and shorts read as shorts and ints), dates (days; date64
    floored to days) by hashInt; longs (unsigned ints read as longs), timestamps and day-time
    intervals (durations; microseconds, floored) by hashLong; floats and doubles by their bits,
    -0.0 as 0.0; decimals of up to 18 digits by hashLong of the unscaled value, wider ones by
    hashUnsafeBytes of its BigInteger bytes; strings and binary by hashUnsafeBytes; arrays and
    structs chained over their elements and fields. A null leaves the running hash as it is.
    Temporal values come as their integers (plain_values)."""
    t = type_
    if value is None or pa.types.is_null(t):
        return seed
    if pa.types.is_dictionary(t):
        return spark_hash(t.value_type, value, seed)
    if pa.types.is_boolean(t):
        return hash_int(int(value), seed)
    if t in (pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16()) or pa.types.is_date32(t):
        return hash_int(value, seed)
    if t in (pa.int64(), pa.uint32()):
        return hash_long(value, seed)
    if pa.types.is_date64(t):
        return hash_int(value // 86_400_000, seed)
    if pa.types.is_timestamp(t) or pa.types.is_duration(t):
        multiply, divide = MICROS[t.unit]
        return hash_long(value * multiply // divide, seed)
    if pa.types.is_float32(t):
        return hash_int(float_bits(value), seed)
    if pa.types.is_float64(t):
        return hash_long(double_bits(value), seed)
    if pa.types.is_decimal(t):
        # Spark's decimals stop at 38 digits; decimal256(76) is hashed by Spark's rule for
        # wide decimals, which has no width limit.
        n = unscaled(value, t.scale)
        if t.precision <= 18:
            return hash_long(n, seed)
        return hash_unsafe_bytes(java_big_integer_bytes(n), seed)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return hash_unsafe_bytes(value.encode(), seed)
    if (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t)
            or pa.types.is_fixed_size_binary(t)):
        return hash_unsafe_bytes(value, seed)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        for element in value:
            seed = spark_hash(t.value_type, element, seed)
        return seed
    if pa.types.is_struct(t):
        for field in t:
            seed = spark_hash(field.type, value[field.name], seed)
        return seed
    raise AssertionError(f"no Spark hash for {t}")


def storage(column):
    """An extension column as its storage, any other as it is."""
    return column.storage if isinstance(column.type, pa.BaseExtensionType) else column


def plain_values(column):
    """The column's type and Python values (an extension column's storage), temporal values
    as their integers in the type's unit."""
    column = storage(column)
    t = column.type
    if pa.types.is_temporal(t) and not pa.types.is_interval(t):
        return t, column.view(pa.int32() if t.bit_width == 32 else pa.int64()).to_pylist()
    return t, column.to_pylist()


def spark_destinations(column, n):
    """Spark's pmod(hash(key), n) for every row (Python's % is pmod for n > 0)."""
    t, values = plain_values(column)
    signed = [(spark_hash(t, v) ^ 0x8000_0000) - 0x8000_0000 for v in values]
    return [h % n for h in signed]


def check_spark_destinations(where, column, ids, n):
    """Each row of `column` in destination `ids[row]`, the one Spark's HashPartitioning
    gives its key."""
    want = spark_destinations(column, n)
    wrong = [(row, got, spark) for row, (got, spark) in enumerate(zip(ids, want, strict=True))
             if got != spark]
    assert not wrong, (f"{where}: {len(wrong)} rows not in Spark's pmod(hash, {n}) "
                       f"(row, destination, Spark's): {wrong[:5]}")


# Range partitioning's order (partout's RangeBounds: arrow-row encodings, ascending, nulls
# first, nested values nulls first too): a sort key per value, built here from each type's
# order. Lists (list views, maps) compare element by element, a prefix first; structs field
# by field; unions by type code, then by the value; dictionaries and run-end encoded columns
# by their values; extension types by their storage.
NULL_KEY = (0,)


def order_key(type_, value):
    t = type_
    if value is None:
        return NULL_KEY
    if pa.types.is_dictionary(t) or pa.types.is_run_end_encoded(t):
        return order_key(t.value_type, value)
    if pa.types.is_struct(t):
        return 1, tuple(order_key(f.type, value[f.name]) for f in t)
    if pa.types.is_map(t):
        return 1, [(order_key(t.key_type, k), order_key(t.item_type, v)) for k, v in value]
    if (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)
            or pa.types.is_list_view(t) or pa.types.is_large_list_view(t)):
        return 1, [order_key(t.value_type, v) for v in value]
    if pa.types.is_interval(t):
        return 1, tuple(value)  # months, then days, then nanoseconds
    assert isinstance(value, (bool, int, float, decimal.Decimal, str, bytes)), (t, value)
    return 1, value


def order_keys(column):
    """Each row's sort key under range partitioning."""
    column = storage(column)
    t = column.type
    if pa.types.is_union(t):
        codes = column.type_codes.to_pylist()
        dense = t.mode == "dense"
        offsets = column.offsets.to_pylist() if dense else range(len(column))
        children = {code: column.field(i) for i, code in enumerate(t.type_codes)}
        return [(code, order_key(children[code].type, children[code][offset].as_py()))
                for code, offset in zip(codes, offsets)]
    t, values = plain_values(column)
    return [order_key(t, v) for v in values]


def check_range_order(where, column, ids, n):
    """With each row of `column` in destination `ids[row]`: every key of a destination at most
    every key of the next non-empty one; null keys (first in the order) in destination 0;
    more than one destination used, unless every key is equal (the null column)."""
    keys = order_keys(column)
    held = [[] for _ in range(n)]
    for k, p in zip(keys, ids, strict=True):
        held[p].append(k)
    used = [p for p, k in enumerate(held) if k]
    for p, q in zip(used, used[1:]):
        highest, lowest = max(held[p]), min(held[q])
        assert highest <= lowest, (f"{where}: destination {p} holds {highest!r}, above "
                                   f"{lowest!r} in destination {q}")
    assert all(p == 0 for k, p in zip(keys, ids) if k == NULL_KEY), f"{where}: nulls not first"
    if min(keys) != max(keys):
        assert len(used) > 1, f"{where}: every row in destination {used}"


def check_spread(where, key_destinations, n):
    """Distinct keys spread over `n` destinations as a random function would: each
    destination's count of distinct keys within mean ± 6·sqrt(mean) (a binomial's standard
    deviation is below sqrt(mean): more than 6 of them out, about 1e-9 by chance). With few
    distinct keys the bound says little; test_distinct_keys_go_where_each_scheme_sends_them
    has thousands."""
    counts = collections.Counter(key_destinations.values())
    mean = len(key_destinations) / n
    bound = 6 * math.sqrt(mean)
    for p in range(n):
        assert abs(counts[p] - mean) <= bound, (
            f"{where}: destination {p} has {counts[p]} of {len(key_destinations)} distinct "
            f"keys, not {mean:.0f} ± {bound:.0f}: {dict(sorted(counts.items()))}")


# Distinct keys of each type for the hash spread check: thousands of them, so that the bound
# is tight (±13% of the mean over 3 destinations). The null and boolean types have 1 and 2
# values: no spread to see. Bytes have 256: all of them.
DISTINCT = 6000
FEW_VALUES = {"null", "bool"}


def distinct_keys(name):
    """DISTINCT different non-null values (all 256 for bytes) of the type of COLUMNS[name]."""
    t = COLUMNS[name].type
    r = range(DISTINCT)
    texts = [f"key {i}" for i in r]
    if name in ("int8", "uint8"):
        return pa.array(range(-128, 128) if name == "int8" else range(256), t)
    if pa.types.is_integer(t):
        return pa.array(r, t)
    if pa.types.is_float16(t):
        return pa.array(r, pa.uint16()).view(t)  # bit patterns 0..5999: finite, distinct
    if pa.types.is_floating(t):
        return pa.array([i / 8 for i in r], t)
    if pa.types.is_decimal(t):
        return pa.array([decimal.Decimal(i * 7919).scaleb(-t.scale) for i in r], t)
    if pa.types.is_interval(t):
        return pa.array([pa.MonthDayNano([i, -i, i * 10]) for i in r], t)
    if pa.types.is_temporal(t):
        step = {"date64": 86_400_000, "time64": 1_000_123, "timestamp": 10**9 + 7}.get(name, 1)
        return pa.array([i * step for i in r],
                        pa.int32() if t.bit_width == 32 else pa.int64()).view(t)
    if pa.types.is_fixed_size_binary(t):
        return pa.array([i.to_bytes(4, "little") for i in r], t)
    if name.endswith("string") or name == "string_view":
        return pa.array(texts, t)
    if "binary" in name:
        return pa.array([s.encode() for s in texts], t)
    ree_values = {"ree_int16_string": (texts, None),
                  "ree_int32_int64": ([i * 2**40 for i in r], None),
                  "ree_int64_list": ([[i, 1] for i in r], pa.list_(pa.int32()))}
    if name in ree_values:
        values, value_type = ree_values[name]
        return pa.RunEndEncodedArray.from_arrays(pa.array(range(1, DISTINCT + 1),
                                                          t.run_end_type),
                                                 pa.array(values, value_type))
    if name in ("list_view", "large_list_view"):
        offset_type = pa.int64() if name.startswith("large") else pa.int32()
        make = pa.LargeListViewArray if name.startswith("large") else pa.ListViewArray
        child = pa.array([f"v{i}" for i in range(DISTINCT + 1)], pa.string())
        return make.from_arrays(pa.array(r, offset_type), pa.array([2] * DISTINCT, offset_type),
                                child)  # overlapping views [v_i, v_i+1]
    if name == "sparse_union":
        return pa.UnionArray.from_sparse(pa.array([i % 2 for i in r], pa.int8()),
                                         [pa.array(r, pa.int32()), pa.array(texts, pa.string())],
                                         ["i", "s"])
    if name == "dense_union":
        children = [i % 2 for i in r]
        return pa.UnionArray.from_dense(pa.array([[2, 7][c] for c in children], pa.int8()),
                                        pa.array([i // 2 for i in r], pa.int32()),
                                        [pa.array(r[::2], pa.int64()),
                                         pa.array(texts[1::2], pa.string())],
                                        ["i", "s"], [2, 7])
    if name in ("uuid", "celsius"):
        stored = (pa.array([uuid.UUID(int=i * 7919).bytes for i in r], pa.binary(16))
                  if name == "uuid" else pa.array([i - 3000 for i in r], pa.int16()))
        return pa.ExtensionArray.from_storage(t, stored)
    values = {
        "dictionary": [f"d{i}" for i in r],
        "list": [[i, i % 3] for i in r],
        "large_list": [[f"e{i}", "x"] for i in r],
        "fixed_list": [[i, None, -i] for i in r],
        "struct": [{"a": i, "b": f"b{i % 7}"} for i in r],
        "map": [[(f"k{i % 5}", i)] for i in r],
    }[name]
    return pa.array(values, t)


@pytest.fixture(scope="module")
def streams(tmp_path_factory):
    d = tmp_path_factory.mktemp("every_type")
    paths = {}
    for name in COLUMNS:
        # A name that says nothing of the format: partout knows the stream by its bytes.
        path = d / f"{name}.data"
        write_stream(input_table(name), path)
        paths[name] = path
    return paths


@pytest.mark.parametrize("name", list(COLUMNS))
def test_round_robin_and_hash_round_trip_every_type(streams, tmp_path, name):
    for scheme in ["round-robin", "hash"]:
        out = tmp_path / scheme
        args = ["--scheme", scheme] + ([] if scheme == "round-robin" else ["--by", name])
        result = repartition(streams[name], *args, "-n", N, "--format", "ipc", "-o", out)
        assert result.returncode == 0, result.stderr
        tables = read_ipc_outputs(out)
        seen = check_outputs(name, tables, by_key=scheme == "hash")
        if scheme == "round-robin":
            # Dealt in turn: no destination is left out.
            assert all(t.num_rows > 0 for t in tables)
        else:
            check_spread(f"hash of {name}", distinct_destinations(seen, tables), N)


def distinct_destinations(seen, tables):
    """Each distinct non-null key (by repr) -> its destination."""
    ids = destinations(tables)
    return {key(value): ids[row] for row, value in seen.items() if value is not None}


def parquet_holds(name):
    """Whether pyarrow itself writes and reads the column back as it was in Parquet."""
    import io
    buf = io.BytesIO()
    try:
        pq.write_table(input_table(name), buf)
        back = pq.read_table(io.BytesIO(buf.getvalue()))
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        return False
    return back.schema.field(name).type == COLUMNS[name].type


@pytest.mark.parametrize("name", list(COLUMNS))
def test_parquet_output_takes_what_parquet_holds_and_names_the_rest(streams, tmp_path, name):
    result = repartition(streams[name], "--by", "row", "-n", N, "-o", tmp_path / "out")
    if result.returncode != 0:
        assert_refused(result, "Parquet")
        assert not parquet_holds(name), f"pyarrow writes {name} to Parquet; partout refused"
        assert not (tmp_path / "out").exists()
        return
    files = sorted((tmp_path / "out").glob("*.parquet"))
    assert len(files) == N
    tables = [pq.read_table(f) for f in files]
    table = input_table(name)
    written = table.schema.field(name).type
    got = {}
    for t in tables:
        column = t.column(name)
        if column.type != written:
            # Run-end encoded columns are written as their values; Date64 and Time32(s), which
            # the parquet crate writes as plain integers, read back as integers of their value.
            if name.startswith("ree_"):
                assert column.type == written.value_type, column.type
            else:
                assert name in ("date64", "time32"), (name, column.type)
                column = column.cast(written)
        got.update(zip(t.column("row").to_pylist(), pylist(column)))
    assert got == dict(zip(table.column("row").to_pylist(), pylist(table.column(name))))


# Keys Spark's Murmur3 has no hash for (Spark has no such type): refused by name. Range
# partitioning orders every type.
REFUSED = {
    "spark": {"uint64", "float16", "time32", "time64", "interval", "list_view",
              "large_list_view", "map", "sparse_union", "dense_union", "ree_int16_string",
              "ree_int32_int64", "ree_int64_list"},
    "range": set(),
}


@pytest.mark.parametrize("name", list(COLUMNS))
def test_spark_and_range_keys_are_taken_or_named(streams, tmp_path, name):
    for scheme, refused in REFUSED.items():
        out = tmp_path / scheme
        result = repartition(streams[name], "--scheme", scheme, "--by", name, "-n", N,
                             "--format", "ipc", "-o", out)
        if name in refused:
            assert_refused(result, f"partitioning by {name}", "unsupported type")
            assert not out.exists()
            continue
        assert result.returncode == 0, result.stderr
        tables = read_ipc_outputs(out)
        check_outputs(name, tables, by_key=True)
        CHECK_DESTINATIONS[scheme](f"{scheme} of {name}", COLUMNS[name], destinations(tables), N)


CHECK_DESTINATIONS = {"spark": check_spark_destinations, "range": check_range_order}


def spark_vector(spark_type, text):
    """(Arrow type, value as spark_hash takes it) of a value of spark_hash_vectors.csv."""
    types = {"tinyint": pa.int8(), "smallint": pa.int16(), "int": pa.int32(),
             "bigint": pa.int64(), "float": pa.float32(), "double": pa.float64(),
             "string": pa.string(), "binary": pa.binary(), "date": pa.date32(),
             "timestamp": pa.timestamp("us", tz="UTC"), "timestamp_ntz": pa.timestamp("us"),
             "boolean": pa.bool_()}
    if spark_type.startswith("decimal("):
        precision, scale = map(int, spark_type[len("decimal("):-1].split(","))
        t = pa.decimal128(precision, scale)
    else:
        t = types[spark_type]
    if text == "null":
        return t, None
    if pa.types.is_integer(t):
        return t, int(text)
    if pa.types.is_floating(t):
        return t, float(text)
    if pa.types.is_decimal(t):
        return t, decimal.Decimal(text)
    if pa.types.is_boolean(t):
        return t, text == "true"
    if pa.types.is_string(t):
        return t, json.loads(text)
    if pa.types.is_binary(t):
        return t, bytes.fromhex(text[2:])
    if pa.types.is_date32(t):
        return t, (datetime.date.fromisoformat(text) - datetime.date(1970, 1, 1)).days
    instant = datetime.datetime.fromisoformat(text.replace("Z", ""))
    return t, (instant - datetime.datetime(1970, 1, 1)) // datetime.timedelta(microseconds=1)


def test_the_spark_reference_is_sparks_own_hash():
    """spark_hash against PySpark's `hash(...)` and `pmod(hash(...), 7)` for every value and
    pair of crates/partout-core/tests/data/spark_hash_vectors.csv."""
    checked = 0
    with SPARK_VECTORS.open(newline="") as f:
        for row in csv.DictReader(f):
            if row["type"].startswith("hash("):
                spark_types = row["type"][len("hash("):-1].split(",")
                texts = row["value_repr"][1:-1].split("; ", 1)
            else:
                spark_types, texts = [row["type"]], [row["value_repr"]]
            h = SPARK_SEED
            for spark_type, text in zip(spark_types, texts, strict=True):
                h = spark_hash(*spark_vector(spark_type, text), h)
            signed = (h ^ 0x8000_0000) - 0x8000_0000
            assert (signed, signed % 7) == (int(row["hash"]), int(row["pmod7"])), row
            checked += 1
    assert checked >= 130


@pytest.mark.parametrize("name", [n for n in COLUMNS if n not in FEW_VALUES])
def test_distinct_keys_go_where_each_scheme_sends_them(tmp_path, name):
    """Thousands of distinct keys of each type, each twice (once in each of two batches),
    through `partout repartition` and the package by every scheme that takes the type: both
    copies of a key together; Spark's scheme where Spark's hash sends each key and range
    partitioning in key order, as for the columns above, but over keys too many and too varied
    for a partitioner to pass by luck; and partout's own hash, which has no outside reference,
    spreading the keys within the binomial bound of check_spread."""
    import partout
    keys = distinct_keys(name)
    count = len(keys)
    keys.validate(full=True)
    assert len(set(map(key, plain_values(keys)[1]))) == count, "the keys are not distinct"
    table = input_table(name, pa.chunked_array([keys, keys]))
    write_stream(table, tmp_path / "keys.data")
    for scheme in ["hash", "spark", "range"]:
        if name in REFUSED.get(scheme, ()):
            continue
        out = tmp_path / scheme
        result = repartition(tmp_path / "keys.data", "--scheme", scheme, "--by", name, "-n", N,
                             "--format", "ipc", "-o", out)
        assert result.returncode == 0, result.stderr
        ran = {"partout repartition": destinations(read_ipc_outputs(out)),
               "partout.partition_ids": partout.partition_ids(table, N, by=name,
                                                              scheme=scheme).to_pylist()}
        for where, ids in ran.items():
            where = f"{where}, {scheme} of {count} {name} keys"
            assert ids[:count] == ids[count:], f"{where}: equal keys in two destinations"
            if scheme == "hash":
                check_spread(where, dict(enumerate(ids[:count])), N)
            else:
                CHECK_DESTINATIONS[scheme](where, keys, ids[:count], N)


@pytest.mark.parametrize("name", list(COLUMNS))
def test_the_package_partitions_every_type_over_the_pycapsule_interface(name):
    """The same columns through the Python package, by the fast hash of the column, Spark's hash
    and range: each destination's table keeps the type and metadata, every row lands once
    with its value and equal keys together, where the scheme sends it; keys Spark cannot hash
    are refused."""
    import partout
    for scheme in ["hash", "spark", "range"]:
        if name in REFUSED.get(scheme, ()):
            with pytest.raises(partout.UnsupportedTypeError, match="spark"):
                partout.partition(input_table(name), N, by=name, scheme=scheme)
            continue
        parts = partout.partition(input_table(name), N, by=name, scheme=scheme)
        assert len(parts) == N
        seen = check_outputs(name, parts, by_key=True)
        if scheme == "hash":
            check_spread(f"hash of {name}", distinct_destinations(seen, parts), N)
        else:
            CHECK_DESTINATIONS[scheme](f"{scheme} of {name}", COLUMNS[name], destinations(parts),
                                       N)
