"""pyarrow reads the per-destination IPC stream files partout's partitioned writer wrote
(crates/partout-exchange/examples/writer_samples.rs): every row is in the destination the
writer's ids name, exactly once, in input order, with every value intact."""
import json
import os
import pathlib

import pyarrow as pa
import pytest

from test_ipc import expected

SAMPLES = pathlib.Path(os.environ.get("PARTOUT_WRITER_SAMPLES", "target/writer-samples"))
ROWS = 10_000


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
def test_every_row_in_its_destination_once(compression):
    destinations = json.loads((SAMPLES / "destinations.json").read_text())
    files = sorted((SAMPLES / compression).glob("part-*.arrows"))
    assert [f.name for f in files] == [f"part-{p:05}.arrows" for p in range(len(destinations))]
    seen = []
    for p, path in enumerate(files):
        with pa.ipc.open_stream(path.read_bytes()) as reader:
            batches = list(reader)
            schema = reader.schema
        assert schema.field("label").type == pa.string_view()
        table = pa.Table.from_batches(batches, schema=schema)
        rows = table.to_pylist()
        assert [row["id"] for row in rows] == destinations[p], f"destination {p}'s ids"
        for row in rows:
            assert row == expected(row["id"]), f"destination {p}, row {row['id']}"
        seen.extend(row["id"] for row in rows)
        if rows:
            assert len(batches) >= 1
    assert sorted(seen) == list(range(ROWS))


def test_streams_hold_several_flushes():
    with pa.ipc.open_stream((SAMPLES / "none" / "part-00000.arrows").read_bytes()) as reader:
        batches = list(reader)
    assert len(batches) > 1, "small targets should flush more than once"
