"""pyarrow.flight reads a finished repartition output that `partout serve` (crates/partout-flight)
serves on 127.0.0.1: every destination's rows once, in its destination, values intact, each
batch numbered in its app_metadata; resuming from a sequence gives exactly the rest; an
unknown exchange is a clear error. The server is stopped at the end, and every call is bounded
in time."""
import json
import os
import pathlib
import subprocess

import pyarrow as pa
import pyarrow.flight as flight
import pyarrow.parquet as pq
import pytest

import partout

PARTOUT = os.environ.get("PARTOUT_BIN", "target/release/partout")


@pytest.fixture
def served(tmp_path):
    rows = 30_000
    table = pa.table(
        {
            "k": pa.array([(i * 7919) % 1009 for i in range(rows)], pa.int64()),
            "id": pa.array(range(rows), pa.int64()),
            "s": pa.array([f"row {i}" if i % 7 else None for i in range(rows)], pa.string()),
        }
    )
    pq.write_table(table, tmp_path / "in.parquet", row_group_size=4000)
    outputs = {}
    for layout in ["files", "shuffle"]:
        out = tmp_path / layout
        partout.repartition(tmp_path / "in.parquet", out, 6, by="k", format="ipc", layout=layout, threads=2)
        outputs[layout] = out
    server = subprocess.Popen(
        [PARTOUT, "serve", "--flight", "127.0.0.1:0", *[f"{name}={path}" for name, path in outputs.items()]],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = server.stdout.readline()
        assert line.startswith("flight: 127.0.0.1:"), line
        client = flight.connect(f"grpc://{line.split(': ', 1)[1].strip()}")
        client.wait_for_available(timeout=10)
        yield client, table
    finally:
        server.kill()
        server.wait(timeout=10)


def read(client, exchange, p, start=0):
    ticket = flight.Ticket(json.dumps({"exchange": exchange, "destination": p, "from_sequence": start}).encode())
    reader = client.do_get(ticket, options=flight.FlightCallOptions(timeout=30))
    out = []
    while True:
        try:
            chunk = reader.read_chunk()
        except StopIteration:
            break
        out.append((int(chunk.app_metadata.to_pybytes()), chunk.data))
    return out


def test_pyarrow_flight_reads_every_destination_once(served):
    client, table = served
    expected_ids = partout.partition_ids(table, 6, by="k").to_pylist()
    for exchange in ["files", "shuffle"]:
        seen = []
        for p in range(6):
            got = read(client, exchange, p)
            assert [s for s, _ in got] == list(range(len(got)))
            part = pa.Table.from_batches([b for _, b in got], schema=table.schema)
            # (Checked against the input's ids: buffers received over Flight may be
            # misaligned, which arrow-rs's C data import refuses in debug builds.)
            ids = part.column("id").to_pylist()
            assert all(expected_ids[i] == p for i in ids), f"{exchange}: a row out of destination {p}"
            seen.extend(ids)
            expected = table.take(pa.array(sorted(ids)))
            assert part.sort_by("id").equals(expected), f"{exchange} {p}: values changed"
            assert len(ids) == expected_ids.count(p)
            if len(got) > 1:
                rest = read(client, exchange, p, start=1)
                assert [s for s, _ in rest] == [s for s, _ in got[1:]]
                assert all(a.equals(b) for (_, a), (_, b) in zip(rest, got[1:]))
        assert sorted(seen) == list(range(table.num_rows)), exchange
    infos = list(client.list_flights(options=flight.FlightCallOptions(timeout=30)))
    assert len(infos) == 12
    assert sum(i.total_records for i in infos) == 2 * table.num_rows
    assert all(i.schema == table.schema for i in infos)


def test_an_unknown_exchange_is_a_clear_flight_error(served):
    client, _ = served
    with pytest.raises(pa.ArrowKeyError, match="no exchange \"nope\""):
        read(client, "nope", 0)
