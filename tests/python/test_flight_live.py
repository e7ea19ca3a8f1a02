"""pyarrow.flight drives a live exchange of `partout serve` on 127.0.0.1: it creates the
exchange with the `create` action, two producers put their rows (partitioned with
partout.partition, each batch tagged with its destination) while four consumers read their
destinations concurrently and acknowledge what they got. Every row arrives once, in its
destination, with its values. A producer that dies mid-stream fails the exchange: its consumers
get an error, never a short stream. Every call is bounded in time."""
import json
import os
import subprocess
import sys
import threading

import pyarrow as pa
import pyarrow.flight as flight
import pytest

import partout

PARTOUT = os.environ.get("PARTOUT_BIN", "target/release/partout")
OPTIONS = flight.FlightCallOptions(timeout=60)


@pytest.fixture
def server():
    process = subprocess.Popen([PARTOUT, "serve", "--flight", "127.0.0.1:0"], stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        assert line.startswith("flight: 127.0.0.1:"), line
        location = f"grpc://{line.split(': ', 1)[1].strip()}"
        client = flight.connect(location)
        client.wait_for_available(timeout=10)
        yield location, client
    finally:
        process.kill()
        process.wait(timeout=10)


def action(client, kind, body):
    return list(client.do_action(flight.Action(kind, json.dumps(body).encode()), options=OPTIONS))


def table(rows, offset):
    ids = list(range(offset, offset + rows))
    return pa.table(
        {
            "k": pa.array([(i * 7919) % 1013 for i in ids], pa.int64()),
            "id": pa.array(ids, pa.int64()),
            "s": pa.array([f"row {i}" if i % 5 else None for i in ids], pa.string()),
            "x": pa.array([i / 3 for i in ids], pa.float64()),
        }
    )


def produce(client, exchange, data, partitions, chunk=700):
    """Puts `data` into the exchange: each slice partitioned, each part tagged with its
    destination."""
    writer, reader = client.do_put(flight.FlightDescriptor.for_path(exchange), data.schema, options=OPTIONS)
    for start in range(0, data.num_rows, chunk):
        parts = partout.partition(data.slice(start, chunk), partitions, by="k")
        for p, part in enumerate(parts):
            for batch in part.to_batches():
                if batch.num_rows:
                    writer.write_with_metadata(batch, pa.py_buffer(str(p).encode()))
    writer.done_writing()
    summary = json.loads(reader.read().to_pybytes())
    writer.close()
    return summary


def consume(client, exchange, p, out, errors):
    """Reads destination p to its end, acknowledging every few batches."""
    try:
        ticket = flight.Ticket(json.dumps({"exchange": exchange, "destination": p}).encode())
        reader = client.do_get(ticket, options=OPTIONS)
        batches, expected = [], 0
        while True:
            try:
                chunk = reader.read_chunk()
            except StopIteration:
                break
            assert int(chunk.app_metadata.to_pybytes()) == expected
            expected += 1
            batches.append(chunk.data)
            if expected % 3 == 0:
                action(client, "ack", {"exchange": exchange, "destination": p, "from_sequence": expected})
        out[p] = batches
    except Exception as e:  # noqa: BLE001 - handed to the test thread
        errors[p] = e


def test_two_producers_and_sixteen_consumers_move_every_row_once(server):
    location, client = server
    partitions = 16
    action(client, "create", {"exchange": "t", "partitions": partitions, "producers": 2, "budget_bytes": 256 * 1024})
    inputs = [table(20_000, 0), table(20_000, 1_000_000)]
    out, errors = {}, {}
    # Sixteen consumers, one a destination, all reading at once (the budget is smaller than the
    # data: a consumer reading one destination after another would hold the others back).
    consumers = [
        threading.Thread(target=consume, args=(flight.connect(location), "t", p, out, errors))
        for p in range(partitions)
    ]
    for thread in consumers:
        thread.start()
    summaries = []
    producers = [
        threading.Thread(target=lambda d=d: summaries.append(produce(flight.connect(location), "t", d, partitions)))
        for d in inputs
    ]
    for thread in producers:
        thread.start()
    for thread in producers + consumers:
        thread.join(timeout=120)
        assert not thread.is_alive()
    assert not errors, errors
    assert sorted(s["rows"] for s in summaries) == [20_000, 20_000]
    everything = pa.concat_tables(inputs)
    ids = partout.partition_ids(everything, partitions, by="k").to_pylist()
    seen = []
    for p in range(partitions):
        part = pa.Table.from_batches(out[p], schema=everything.schema)
        got = part.column("id").to_pylist()
        index = {v: i for i, v in enumerate(everything.column("id").to_pylist())}
        assert all(ids[index[i]] == p for i in got), f"a row out of destination {p}"
        expected = everything.take(pa.array(sorted(index[i] for i in got)))
        assert part.sort_by("id").equals(expected.sort_by("id")), f"destination {p}: values changed"
        seen.extend(got)
    assert sorted(seen) == sorted(everything.column("id").to_pylist())
    info = client.get_flight_info(flight.FlightDescriptor.for_path("t", "0"), options=OPTIONS)
    assert json.loads(info.app_metadata)["complete"] is True


PRODUCER_THAT_DIES = """
import json, os, sys
import pyarrow as pa, pyarrow.flight as flight
client = flight.connect(sys.argv[1])
schema = pa.schema([("k", pa.int64()), ("id", pa.int64())])
writer, _ = client.do_put(flight.FlightDescriptor.for_path("dies"), schema)
batch = pa.record_batch([pa.array(range(100), pa.int64()), pa.array(range(100), pa.int64())], schema=schema)
for _ in range(3):
    writer.write_with_metadata(batch, pa.py_buffer(b"0"))
sys.stdout.write("sent\\n")
sys.stdout.flush()
os._exit(1)  # the connection drops mid-stream, without an end
"""


def test_a_producer_that_dies_fails_the_exchange_for_its_consumers(server):
    location, client = server
    action(client, "create", {"exchange": "dies", "partitions": 2, "producers": 1})
    out, errors = {}, {}
    consumer = threading.Thread(target=consume, args=(flight.connect(location), "dies", 0, out, errors))
    consumer.start()
    died = subprocess.run([sys.executable, "-c", PRODUCER_THAT_DIES, location], capture_output=True, text=True, timeout=60)
    assert "sent" in died.stdout, died.stderr
    consumer.join(timeout=60)
    assert not consumer.is_alive()
    assert 0 in errors, "the consumer must get an error, not a short stream"
    assert "failed" in str(errors[0]), errors[0]
    # A consumer arriving later gets it too; the unknown and the impossible are clear errors.
    with pytest.raises(flight.FlightError, match="failed"):
        consume_now(client, "dies", 1)
    with pytest.raises(pa.ArrowInvalid, match="expected \"ipc\" or \"presto\""):
        action(client, "create", {"exchange": "x", "partitions": 2, "producers": 1, "format": "csv"})
    with pytest.raises(pa.ArrowInvalid, match="served already"):
        action(client, "create", {"exchange": "dies", "partitions": 2, "producers": 1})


def consume_now(client, exchange, p):
    ticket = flight.Ticket(json.dumps({"exchange": exchange, "destination": p}).encode())
    return client.do_get(ticket, options=OPTIONS).read_all()


def test_dictionary_columns_from_pyarrow_travel_through_a_live_exchange(server):
    """A producer's dictionary-encoded strings (as pyarrow, Polars and DuckDB hand them over)
    go through DoPut and come back equal, value by value, in the destination partout's hash
    gives each row."""
    _, client = server
    partitions = 3
    action(client, "create", {"exchange": "dict", "partitions": partitions, "producers": 1})
    plain = table(5_000, 0)
    colours = pa.array([["red", "green", "blue", None][i % 4] for i in range(plain.num_rows)])
    data = plain.append_column("colour", colours.dictionary_encode())
    assert pa.types.is_dictionary(data.schema.field("colour").type)
    summary = produce(client, "dict", data, partitions)
    assert summary["rows"] == data.num_rows
    out, errors = {}, {}
    for p in range(partitions):
        consume(client, "dict", p, out, errors)
    assert not errors, errors
    ids = partout.partition_ids(data, partitions, by="k").to_pylist()
    for p in range(partitions):
        got = pa.Table.from_batches(out[p])
        assert pa.types.is_dictionary(got.schema.field("colour").type)
        expected = data.filter(pa.array([i == p for i in ids]))
        assert got.num_rows == expected.num_rows > 0
        # Every value of every column, the dictionary column decoded, in id order.
        assert got.sort_by("id").to_pylist() == expected.sort_by("id").to_pylist(), f"destination {p}"
