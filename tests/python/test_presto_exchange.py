"""Presto's own exchange client (ExchangeClient and PageBufferClient of presto-main-base 0.296,
behind an RpcShuffleClient on java.net.http: tests/java/presto-reader, ExchangePull) pulls
every page of every buffer from `partout serve --presto` on 127.0.0.1, acknowledging and
deleting as Presto does, also with replies dropped and retried: the values it reads equal the
input's, every row once, in its destination. Served: a finished output of Presto pages, an
Arrow IPC output converted to pages, and a live exchange fed by pyarrow.flight producers.
Every process is bounded in time."""
import json
import os
import pathlib
import struct
import subprocess
import threading

import pyarrow as pa
import pyarrow.flight as flight
import pyarrow.parquet as pq
import pytest

import partout

PARTOUT = os.environ.get("PARTOUT_BIN", "target/release/partout")
READER = pathlib.Path(os.environ.get("PARTOUT_PRESTO_READER", "tests/java/presto-reader"))
BUFFERS = 6


def table(rows, offset=0):
    ids = range(offset, offset + rows)
    return pa.table(
        {
            "k": pa.array([(i * 7919) % 1013 for i in ids], pa.int64()),
            "id": pa.array(ids, pa.int64()),
            "s": pa.array([f"row {i} é" if i % 5 else None for i in ids], pa.string()),
            "x": pa.array([i / 3 for i in ids], pa.float64()),
        }
    )


def line(k, id_, s, x):
    """A row as Presto's reader prints it: longs as numbers, a double as its bits, a varchar
    as hex, a null as null."""
    text = "null" if s is None else s.encode().hex()
    bits = struct.unpack("<q", struct.pack("<d", x))[0]
    return f"{k}|{id_}|{text}|{bits}"


def expected(data, buffers):
    ids = partout.partition_ids(data, buffers, by="k").to_pylist()
    rows = zip(*(data.column(c).to_pylist() for c in ["k", "id", "s", "x"]))
    out = {b: [] for b in range(buffers)}
    for p, row in zip(ids, rows):
        out[p].append(line(*row))
    return out


def pull(address, task, out, drop_every=0):
    classpath = f"{READER / 'target' / 'classes'}{os.pathsep}{READER / 'target' / 'lib' / '*'}"
    command = ["java", "-cp", classpath, "partout.ExchangePull", "--url", f"http://{address}", "--task", task,
               "--buffers", str(BUFFERS), "--out", str(out), "--timeout-seconds", "90"]
    if drop_every:
        command += ["--drop-every", str(drop_every)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(process):
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    return stdout


def check(out, want):
    for b in range(BUFFERS):
        got = (out / f"buffer-{b}.txt").read_text().splitlines()
        assert len(got) == len(want[b]), f"buffer {b}: {len(got)} rows, {len(want[b])} expected"
        assert sorted(got) == sorted(want[b]), f"buffer {b}: values differ"


@pytest.fixture
def server(tmp_path):
    data = table(120_000)
    pq.write_table(data, tmp_path / "in.parquet", row_group_size=10_000)
    partout.repartition(tmp_path / "in.parquet", tmp_path / "pages", BUFFERS, by="k", format="presto",
                        layout="shuffle", threads=2)
    partout.repartition(tmp_path / "in.parquet", tmp_path / "ipc", BUFFERS, by="k", format="ipc",
                        layout="files", threads=2)
    process = subprocess.Popen(
        [PARTOUT, "serve", f"pages={tmp_path / 'pages'}", f"ipc={tmp_path / 'ipc'}",
         "--flight", "127.0.0.1:0", "--presto", "127.0.0.1:0"],
        stdout=subprocess.PIPE, text=True)
    try:
        addresses = dict(process.stdout.readline().strip().split(": ") for _ in range(2))
        assert addresses["presto"].startswith("127.0.0.1:"), addresses
        yield addresses, data
    finally:
        process.kill()
        process.wait(timeout=10)


@pytest.mark.parametrize("exchange", ["pages", "ipc"])
@pytest.mark.parametrize("drop_every", [0, 2])
def test_prestos_exchange_client_pulls_every_row_of_a_finished_output(server, tmp_path, exchange, drop_every):
    addresses, data = server
    out = tmp_path / f"pulled-{exchange}-{drop_every}"
    summary = finish(pull(addresses["presto"], exchange, out, drop_every)).split()
    assert summary[:2] == ["buffers", str(BUFFERS)] and int(summary[5]) == data.num_rows, summary
    if drop_every:
        assert int(summary[7]) >= 2, f"replies were dropped and retried: {summary}"
    check(out, expected(data, BUFFERS))


def test_prestos_exchange_client_pulls_a_live_exchange_fed_over_flight(server, tmp_path):
    addresses, _ = server
    client = flight.connect(f"grpc://{addresses['flight']}")
    options = flight.FlightCallOptions(timeout=60)
    body = {"exchange": "live", "partitions": BUFFERS, "producers": 2, "budget_bytes": 1 << 20, "format": "presto"}
    list(client.do_action(flight.Action("create", json.dumps(body).encode()), options=options))
    # Presto's client starts first: it long-polls until pages come, and ends at completion.
    out = tmp_path / "pulled-live"
    process = pull(addresses["presto"], "live", out, drop_every=3)
    inputs = [table(30_000, 0), table(30_000, 1_000_000)]

    def produce(data):
        producer = flight.connect(f"grpc://{addresses['flight']}")
        writer, reader = producer.do_put(flight.FlightDescriptor.for_path("live"), data.schema, options=options)
        for start in range(0, data.num_rows, 5_000):
            for p, part in enumerate(partout.partition(data.slice(start, 5_000), BUFFERS, by="k")):
                for batch in part.to_batches():
                    if batch.num_rows:
                        writer.write_with_metadata(batch, pa.py_buffer(str(p).encode()))
        writer.done_writing()
        reader.read()
        writer.close()

    producers = [threading.Thread(target=produce, args=(d,)) for d in inputs]
    for thread in producers:
        thread.start()
    for thread in producers:
        thread.join(timeout=120)
        assert not thread.is_alive()
    summary = finish(process).split()
    assert int(summary[5]) == 60_000, summary
    check(out, expected(pa.concat_tables(inputs), BUFFERS))
