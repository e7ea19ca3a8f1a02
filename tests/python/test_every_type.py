"""Every Arrow type a user's file can hold goes through `partout repartition` and comes back
as pyarrow wrote it: primitives, decimals 32 to 256, views, dictionaries, intervals, nested
types, maps, sparse and dense unions, run-end encoded columns, list views, extension types and
custom metadata. Each type's column is written by pyarrow as an Arrow IPC stream under a name
that says nothing of its format, repartitioned into 3 destinations by round-robin and by the
fast hash of that column (IPC out), and read back with pyarrow: every row once, values and
types as written, equal keys in one destination. Parquet output takes what Parquet can hold
and refuses the rest by name; Spark's hash and range partitioning take the keys they can and
refuse the rest by name. A refusal is exit code 2 and one line, never a crash."""
import datetime
import decimal
import os
import pathlib
import subprocess
import uuid

import pyarrow as pa
import pyarrow.ipc
import pyarrow.parquet as pq
import pytest

PARTOUT = pathlib.Path(os.environ.get("PARTOUT_BIN", "target/release/partout"))
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


def input_table(name):
    field = pa.field(name, COLUMNS[name].type, metadata={b"note": f"column {name}".encode()})
    schema = pa.schema([pa.field("row", pa.int64(), nullable=False), field], metadata=METADATA)
    return pa.Table.from_arrays([pa.array(range(ROWS), pa.int64()), COLUMNS[name]],
                                schema=schema)


def write_stream(table, path):
    # In two batches, so a destination gets rows of both.
    with pa.ipc.new_stream(path, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=ROWS // 2 + 1):
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
        check_outputs(name, tables, by_key=scheme == "hash")
        if scheme == "round-robin":
            # Dealt in turn: no destination is left out.
            assert all(t.num_rows > 0 for t in tables)


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
        check_outputs(name, read_ipc_outputs(out), by_key=True)


@pytest.mark.parametrize("name", list(COLUMNS))
def test_the_package_partitions_every_type_over_the_pycapsule_interface(name):
    """The same columns through the Python package, by the fast hash of the column: each
    destination's table keeps the type and metadata, every row lands once with its value and
    equal keys together."""
    import partout
    parts = partout.partition(input_table(name), N, by=name)
    assert len(parts) == N
    check_outputs(name, parts, by_key=True)
