"""Outputs written to and inputs read from an object store: S3 servers on 127.0.0.1 started
by the tests (moto's, in server mode; and s3s-fs, partout-job's s3_server example, in a process
of its own). Every format and layout round-trips (read back from the store by pyarrow's S3 file
system, Polars, DuckDB and partout's own reader), equal to the same run on local disk; inputs
read from a prefix or a pattern equal the same files read from disk; an output prefix that
holds data is refused unless overwriting, which replaces it; a failing run commits nothing; a
run interrupted while uploading, or whose server is killed mid-upload and comes back, leaves no
object and no upload pending; 1 GB to 64 and to 10,000 destinations stays within the memory
limit, measured from outside; a secret never shows in an error."""

import json
import os
import signal
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.compute
import pyarrow.fs
import pyarrow.parquet as pq
import pytest

import partout
from runs import file_of, peak_rss

SECRET = "s3cr3t-never-shown"


@pytest.fixture(scope="module")
def s3():
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    _, port = server.get_host_and_port()
    endpoint = f"http://127.0.0.1:{port}"
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key=SECRET,
        region_name="us-east-1",
    )
    client.create_bucket(Bucket="lake")
    yield endpoint, client
    server.stop()


def options(endpoint):
    return {
        "aws_endpoint": endpoint,
        "aws_allow_http": "true",
        "aws_access_key_id": "testing",
        "aws_secret_access_key": SECRET,
        "aws_region": "us-east-1",
    }


def keys(client, prefix):
    listed = client.list_objects_v2(Bucket="lake", Prefix=prefix + "/")
    return sorted(o["Key"][len(prefix) + 1 :] for o in listed.get("Contents", []))


def table(rows):
    return pa.table(
        {
            "k": pa.array([(i * 7919) % 1009 for i in range(rows)], pa.int64()),
            "year": pa.array([2020 + i % 3 for i in range(rows)], pa.int32()),
            "v": pa.array([f"value {i}" for i in range(rows)], pa.string()),
        }
    )


def download(client, prefix, to):
    """The objects under `prefix` as a local directory: a finished output, as committed."""
    for key in keys(client, prefix):
        path = to / key
        path.parent.mkdir(parents=True, exist_ok=True)
        client.download_file("lake", f"{prefix}/{key}", str(path))
    return to


@pytest.mark.parametrize(
    "fmt,layout", [("parquet", "files"), ("ipc", "files"), ("ipc", "shuffle"), ("presto", "files")]
)
def test_every_format_and_layout_round_trips_through_the_store(s3, tmp_path, fmt, layout):
    endpoint, client = s3
    data = table(30_000)
    source = tmp_path / "in.parquet"
    pq.write_table(data, source, row_group_size=5000)
    prefix = f"rt-{fmt}-{layout}"
    run = dict(by="k", format=fmt, layout=layout, threads=2, memory_limit="16MiB")
    manifest = partout.repartition(source, f"s3://lake/{prefix}", 4, storage_options=options(endpoint), **run)
    local = partout.repartition(source, tmp_path / "local", 4, **run)
    stored = keys(client, prefix)
    assert "_manifest.json" in stored and "_SUCCESS" in stored
    assert json.loads(client.get_object(Bucket="lake", Key=f"{prefix}/_manifest.json")["Body"].read()) == manifest
    named = [file_of(d) for d in manifest["destinations"] if d.get("files")]
    named += [f[k] for f in manifest.get("shuffle_files") or [] for k in ("data", "index")]
    # Exactly the objects the manifest names, and the two markers.
    assert sorted(named + ["_manifest.json", "_SUCCESS"]) == stored
    copy = download(client, prefix, tmp_path / "copy")
    schema = data.schema if fmt == "presto" else None
    for p in range(4):
        assert manifest["destinations"][p]["rows"] == local["destinations"][p]["rows"]
        if fmt == "parquet":
            name = file_of(manifest["destinations"][p])
            got = pq.read_table(copy / name)
            want = pq.read_table(tmp_path / "local" / file_of(local["destinations"][p]))
        else:
            got = partout.read(copy, destination=p, schema=schema)
            want = partout.read(tmp_path / "local", destination=p, schema=schema)
            # Read from the store itself, by ranged GETs: the same rows.
            remote = partout.read(f"s3://lake/{prefix}", destination=p, schema=schema,
                                  storage_options=options(endpoint))
            assert remote.equals(got), f"destination {p} read from the store"
        assert got.sort_by("v").equals(want.sort_by("v")), f"destination {p}"


def test_a_hive_dataset_reads_back_with_pyarrow_and_polars_from_the_store(s3, tmp_path):
    endpoint, client = s3
    data = table(20_000)
    manifest = partout.write_dataset(
        data, "s3://lake/hive", partition_by="year", storage_options=options(endpoint)
    )
    assert manifest["partitions"] == 3
    fs = pyarrow.fs.S3FileSystem(
        access_key="testing", secret_key=SECRET, endpoint_override=endpoint, scheme="http",
        region="us-east-1",
    )
    pieces = []
    for d in manifest["destinations"]:
        assert file_of(d).startswith(f"year={file_of(d).split('=')[1].split('/')[0]}/part-")
        piece = pq.read_table(f"lake/hive/{file_of(d)}", filesystem=fs)
        year = int(file_of(d).split("/")[0].split("=")[1])
        pieces.append(piece.append_column("year", pa.array([year] * piece.num_rows, pa.int32())))
    got = pa.concat_tables(pieces).select(["k", "year", "v"]).sort_by("v")
    assert got.equals(data.sort_by("v"))
    import polars as pl

    first = file_of(manifest["destinations"][0])
    frame = pl.read_parquet(
        f"s3://lake/hive/{first}",
        storage_options={
            "aws_endpoint_url": endpoint,
            "aws_access_key_id": "testing",
            "aws_secret_access_key": SECRET,
            "aws_region": "us-east-1",
            "aws_allow_http": "true",
        },
    )
    assert frame.height == manifest["destinations"][0]["rows"]


def test_a_prefix_holding_data_is_refused_and_overwrite_replaces_it(s3, tmp_path):
    endpoint, client = s3
    first = partout.write_dataset(table(5000), "s3://lake/again", 3, by="k", storage_options=options(endpoint))
    before = keys(client, "again")
    with pytest.raises(partout.PartoutIOError, match="s3://lake/again.*not empty"):
        partout.write_dataset(table(10), "s3://lake/again", 3, by="k", storage_options=options(endpoint))
    assert keys(client, "again") == before, "a refused run changed the output"
    second = partout.write_dataset(
        table(7000), "s3://lake/again", 2, by="k", overwrite=True, storage_options=options(endpoint)
    )
    after = keys(client, "again")
    assert sorted([file_of(d) for d in second["destinations"]] + ["_SUCCESS", "_manifest.json"]) == after
    assert not set(file_of(d) for d in first["destinations"]) & set(after), "old objects are left"
    assert sum(d["rows"] for d in second["destinations"]) == 7000


def test_append_and_overwrite_partitions_in_the_store(s3, tmp_path):
    """In a store: append adds the run's objects and merges the manifest; overwrite-partitions
    deletes the objects of the value directories it rewrote once the new manifest is in
    place; the objects there are exactly those the manifest names, read back as expected."""
    endpoint, client = s3
    at = "s3://lake/modes"
    run = lambda data, mode: partout.write_dataset(  # noqa: E731
        data, at, partition_by="year", mode=mode, storage_options=options(endpoint))
    first, second = table(3000), table(2000)
    run(first, "error")
    merged = run(second, "append")
    names = sorted(f["name"] for d in merged["destinations"] for f in d["files"])
    assert keys(client, "modes") == sorted(names + ["_SUCCESS", "_manifest.json"])
    assert merged["output_rows"] == 5000
    assert all(len(d["files"]) == 2 for d in merged["destinations"]), merged["destinations"]
    third = table(900).filter(pa.compute.equal(pa.compute.field("year"), 2021))
    replaced = run(third, "overwrite-partitions")
    names = sorted(f["name"] for d in replaced["destinations"] for f in d["files"])
    assert keys(client, "modes") == sorted(names + ["_SUCCESS", "_manifest.json"]), "old objects left"
    copy = download(client, "modes", tmp_path / "copy")
    got = pq.read_table(copy, partitioning="hive").select(["v", "year"]).sort_by("v")
    want = pa.concat_tables([first, second]).filter(
        pa.compute.not_equal(pa.compute.field("year"), 2021))
    want = pa.concat_tables([want, third]).select(["v", "year"]).sort_by("v")
    assert got.num_rows == want.num_rows == replaced["output_rows"]
    assert got["v"].to_pylist() == want["v"].to_pylist()


def test_a_failing_run_commits_nothing_and_shows_no_secret(s3, tmp_path):
    endpoint, client = s3
    # More values than allowed: the run fails when it meets the 11th, and commits nothing.
    with pytest.raises(partout.PartoutError, match="more than 10 distinct values"):
        partout.write_dataset(
            table(5000), "s3://lake/refused", partition_by="k", max_partitions=10,
            storage_options=options(endpoint),
        )
    assert keys(client, "refused") == []
    # A bucket that does not exist: an error naming it, without the secret.
    with pytest.raises(partout.PartoutError) as failed:
        partout.write_dataset(table(10), "s3://no-such-bucket/x", 2, by="k", storage_options=options(endpoint))
    assert "no-such-bucket" in str(failed.value) and SECRET not in str(failed.value)
    # An option the store does not know: named, its value not shown.
    with pytest.raises(partout.InvalidArgumentError) as failed:
        partout.write_dataset(
            table(10), "s3://lake/typo", 2, by="k",
            storage_options={**options(endpoint), "aws_secret_key_idd": SECRET},
        )
    assert "aws_secret_key_idd" in str(failed.value) and SECRET not in str(failed.value)


def test_the_cli_writes_to_the_store_with_storage_options(s3, tmp_path, partout_bin):
    endpoint, client = s3
    source = tmp_path / "in.parquet"
    pq.write_table(table(8000), source)
    args = [partout_bin, "repartition", "--quiet", str(source), "--by", "k", "-n", "3", "-o", "s3://lake/cli"]
    for key, value in options(endpoint).items():
        args += ["--storage-option", f"{key}={value}"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    manifest = json.loads(client.get_object(Bucket="lake", Key="cli/_manifest.json")["Body"].read())
    assert manifest["output_rows"] == 8000
    # Again without --overwrite: exit 2, one line naming the prefix, no secret anywhere.
    again = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and "s3://lake/cli" in again.stderr, again.stderr
    assert SECRET not in again.stderr + again.stdout
    helped = subprocess.run([partout_bin, "repartition", "--help"], capture_output=True, text=True, timeout=60)
    assert "--storage-option" in helped.stdout and SECRET not in helped.stdout


def test_inputs_in_the_store_read_as_the_same_files_on_disk(s3, tmp_path):
    endpoint, client = s3
    data = table(24_000)
    local = tmp_path / "in"
    (local / "sub").mkdir(parents=True)
    pq.write_table(data.slice(0, 12_000), local / "a.parquet", row_group_size=2500)
    import pyarrow.csv as csv

    csv.write_csv(data.slice(12_000), local / "sub" / "b.csv")
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        client.upload_file(str(path), "lake", f"in/{path.relative_to(local)}")
    client.put_object(Bucket="lake", Key="in/_SUCCESS", Body=b"")
    run = dict(by="k", format="ipc", threads=2)
    stored = partout.repartition("s3://lake/in/", tmp_path / "remote", 4, storage_options=options(endpoint), **run)
    here = partout.repartition(local, tmp_path / "here", 4, **run)
    assert stored["input_rows"] == here["input_rows"] == 24_000
    for p in range(4):
        got = partout.read(tmp_path / "remote", destination=p)
        want = partout.read(tmp_path / "here", destination=p)
        assert got.sort_by("v").equals(want.sort_by("v")), f"destination {p}"
    # A pattern names only its files; storage options without a store are refused.
    only = partout.repartition("s3://lake/in/*.parquet", tmp_path / "only", 2, storage_options=options(endpoint), **run)
    assert only["input_rows"] == 12_000
    with pytest.raises(partout.PartoutError, match="storage options"):
        partout.repartition(local, tmp_path / "refused", 2, storage_options=options(endpoint), **run)


def test_the_cli_reads_from_and_writes_to_the_store(s3, tmp_path, partout_bin):
    endpoint, client = s3
    source = tmp_path / "in.parquet"
    pq.write_table(table(9000), source, row_group_size=1000)
    client.upload_file(str(source), "lake", "cli-in/part-0.parquet")
    def cli(source, out):
        args = [partout_bin, "repartition", "--quiet", source, "--by", "k", "-n", "3", "-o", out]
        for key, value in options(endpoint).items():
            args += ["--storage-option", f"{key}={value}"]
        return subprocess.run(args, capture_output=True, text=True, timeout=120)

    done = cli("s3://lake/cli-in/", "s3://lake/cli-both")
    assert done.returncode == 0, done.stderr
    manifest = json.loads(client.get_object(Bucket="lake", Key="cli-both/_manifest.json")["Body"].read())
    assert manifest["input_rows"] == manifest["output_rows"] == 9000
    missing = cli("s3://lake/no-such-prefix/", "s3://lake/x")
    assert missing.returncode == 2 and "s3://lake/no-such-prefix" in missing.stderr, missing.stderr
    assert SECRET not in missing.stderr


def test_an_upload_interrupted_leaves_no_object_and_no_upload_pending(s3, tmp_path, partout_bin):
    endpoint, client = s3
    source = big_single_destination(tmp_path / "big.arrow")
    args = [partout_bin, "repartition", "--quiet", str(source), "--by", "k", "-n", "1", "--format", "ipc",
            "-o", "s3://lake/interrupted"]
    for key, value in options(endpoint).items():
        args += ["--storage-option", f"{key}={value}"]
    run = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not client.list_multipart_uploads(Bucket="lake", Prefix="interrupted/").get("Uploads"):
            assert run.poll() is None, "the run ended before its upload was seen: " + run.stderr.read()
            assert time.monotonic() < deadline, "no upload began"
            time.sleep(0.005)
        run.send_signal(signal.SIGINT)
        _, stderr = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == 130, stderr
    assert "interrupted" in stderr and SECRET not in stderr, stderr
    assert keys(client, "interrupted") == []
    assert not client.list_multipart_uploads(Bucket="lake", Prefix="interrupted/").get("Uploads")


def test_partout_serve_serves_an_output_in_the_store_over_flight(s3, tmp_path, partout_bin):
    endpoint, client = s3
    import pyarrow.flight as flight

    data = table(12_000)
    pq.write_table(data, tmp_path / "in.parquet", row_group_size=3000)
    for layout in ["files", "shuffle"]:
        partout.repartition(tmp_path / "in.parquet", f"s3://lake/served-{layout}", 5, by="k", format="ipc",
                            layout=layout, threads=2, storage_options=options(endpoint))
    args = [partout_bin, "serve", "--flight", "127.0.0.1:0", "s3://lake/served-files", "shuffle=s3://lake/served-shuffle"]
    for key, value in options(endpoint).items():
        args += ["--storage-option", f"{key}={value}"]
    server = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        assert line.startswith("flight: 127.0.0.1:"), line + server.stderr.read()
        reader = flight.connect(f"grpc://{line.split(': ', 1)[1].strip()}")
        reader.wait_for_available(timeout=10)
        for exchange in ["served-files", "shuffle"]:
            parts = []
            for p in range(5):
                ticket = flight.Ticket(json.dumps({"exchange": exchange, "destination": p}).encode())
                got = reader.do_get(ticket, options=flight.FlightCallOptions(timeout=30)).read_all()
                direct = partout.read(f"s3://lake/served-{exchange.split('-')[-1]}", destination=p,
                                      storage_options=options(endpoint))
                assert got.sort_by("v").equals(direct.sort_by("v")), f"{exchange} {p}"
                parts.append(got)
            assert pa.concat_tables(parts).sort_by("v").equals(data.sort_by("v")), exchange
    finally:
        server.kill()
        server.wait(timeout=10)
    # A prefix holding no output: one line naming it, without the secret.
    missing = subprocess.run(args[:4] + ["s3://lake/nothing-here"] + args[6:], capture_output=True, text=True,
                             timeout=60)
    assert missing.returncode == 2 and "s3://lake/nothing-here" in missing.stderr, missing.stderr
    assert SECRET not in missing.stderr


DUCKDB_READS = """
import duckdb, glob, json, os, sys
import duckdb_extension_httpfs as ext
endpoint, secret, url = sys.argv[1:4]
con = duckdb.connect()
con.execute("LOAD '%s'" % glob.glob(os.path.join(os.path.dirname(ext.__file__), "extensions", "*", "httpfs.duckdb_extension"))[0])
for setting, value in [("s3_endpoint", endpoint), ("s3_use_ssl", "false"), ("s3_url_style", "path"),
                       ("s3_access_key_id", "testing"), ("s3_secret_access_key", secret), ("s3_region", "us-east-1")]:
    con.execute(f"SET {setting} = '{value}'")
rows = con.execute(
    "SELECT year, count(*), sum(k), min(v), max(v) FROM read_parquet(?, hive_partitioning = true) "
    "GROUP BY year ORDER BY year", [url]).fetchall()
print(json.dumps(rows))
"""


def test_duckdb_reads_the_hive_dataset_from_the_store(s3, tmp_path):
    """DuckDB's httpfs, from the pip package of its extension (DuckDB fetches extensions from its
    own server otherwise), in an environment of its own (the extension is built for DuckDB 1.5.5)."""
    endpoint, client = s3
    python = os.environ.get("PARTOUT_DUCKDB_HTTPFS_PYTHON")
    if not python:
        pytest.fail("PARTOUT_DUCKDB_HTTPFS_PYTHON names a Python with duckdb-extension-httpfs (./run-tests sets it)")
    data = table(30_000)
    manifest = partout.write_dataset(data, "s3://lake/duck", partition_by="year", storage_options=options(endpoint))
    assert manifest["partitions"] == 3
    done = subprocess.run(
        [python, "-c", DUCKDB_READS, endpoint.removeprefix("http://"), SECRET, "s3://lake/duck/*/*.parquet"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    got = [tuple(r) for r in json.loads(done.stdout)]
    want = []
    for year in (2020, 2021, 2022):
        part = data.filter(pa.compute.equal(data["year"], year))
        want.append((year, part.num_rows, pa.compute.sum(part["k"]).as_py(),
                     pa.compute.min(part["v"]).as_py(), pa.compute.max(part["v"]).as_py()))
    assert got == want


def start_s3_server(binary, root, port=0):
    """partout-job's s3_server example (s3s-fs: buckets are `root`'s directories, in-progress
    uploads are files there too) on 127.0.0.1: the process and its endpoint."""
    server = subprocess.Popen([binary, str(root), str(port), "testing", SECRET], stdout=subprocess.PIPE, text=True)
    line = server.stdout.readline()
    if not line.startswith("s3: http://127.0.0.1:"):
        server.kill()
        pytest.fail(f"the S3 server did not start: {line!r}")
    return server, line.split(": ", 1)[1].strip()


@pytest.fixture(scope="module")
def s3_fs(tmp_path_factory, s3_server_bin):
    """An s3s-fs server: its ranged GETs read only their range, for the tests of many objects."""
    root = tmp_path_factory.mktemp("s3s")
    (root / "lake").mkdir()
    server, endpoint = start_s3_server(s3_server_bin, root)
    try:
        yield endpoint, root
    finally:
        server.kill()
        server.wait(timeout=10)


def test_a_hive_dataset_of_10000_values_reads_back_with_pyarrow(s3_fs, tmp_path):
    endpoint, _ = s3_fs
    rows = 40_000
    data = pa.table({
        "k": pa.array([(i * 7919) % 10_000 for i in range(rows)], pa.int64()),
        "id": pa.array(range(rows), pa.int64()),
        "v": pa.array([f"value {i}" for i in range(rows)], pa.string()),
    })
    manifest = partout.write_dataset(data, "s3://lake/values", partition_by="k", max_partitions=10_000,
                                     threads=2, storage_options=options(endpoint))
    assert manifest["partitions"] == 10_000
    fs = pyarrow.fs.S3FileSystem(access_key="testing", secret_key=SECRET, endpoint_override=endpoint,
                                 scheme="http", region="us-east-1")
    import pyarrow.dataset as ds

    # pyarrow: the dataset of the files the manifest names, their values from their
    # directories' names (s3s-fs answers a HEAD of a prefix with an error, which pyarrow's
    # discovery of a directory does not pass over).
    files = [f"lake/values/{file_of(d)}" for d in manifest["destinations"]]
    dataset = ds.dataset(files, filesystem=fs, format="parquet", partition_base_dir="lake/values",
                         partitioning=ds.partitioning(pa.schema([("k", pa.int64())]), flavor="hive"))
    got = dataset.to_table().select(["k", "id", "v"]).sort_by("id")
    assert got.equals(data), "pyarrow read another table back"
    # (Polars reads a dataset from the store in the moto test above: s3s-fs does not take
    # the `=` of a Hive directory percent-encoded, as Polars' client sends it.)


def big_single_destination(path, rows=120_000):
    """An IPC file of about 120 MB that partitions to one destination: fifteen parts."""
    blob = os.urandom(1000 * rows)
    data = pa.table({
        "k": pa.array([i % 7 for i in range(rows)], pa.int64()),
        "v": pa.array([blob[i * 1000:(i + 1) * 1000] for i in range(rows)], pa.binary()),
    })
    with pa.ipc.new_file(path, data.schema) as writer:
        writer.write_table(data, max_chunksize=8192)
    return path


def pending_uploads(root):
    """s3s-fs's in-progress multipart uploads: their records and parts, files in its root."""
    return sorted(p.name for p in root.iterdir() if p.name.startswith((".upload-", ".upload_id-")))


def test_the_server_killed_mid_upload_leaves_nothing_once_it_is_back(tmp_path, partout_bin, s3_server_bin):
    """The server dies while a destination's parts upload: the run fails (exit 2, naming the
    object and the cause), and takes back what it began once the server is back, within its
    retry_timeout: no upload pending, no object, no manifest, no _SUCCESS."""
    root = tmp_path / "s3s"
    (root / "lake").mkdir(parents=True)
    source = big_single_destination(tmp_path / "big.arrow")
    server, endpoint = start_s3_server(s3_server_bin, root)
    port = endpoint.rsplit(":", 1)[1]
    args = [partout_bin, "repartition", "--quiet", str(source), "--by", "k", "-n", "1", "--format", "ipc",
            "-o", "s3://lake/killed"]
    # Few retries, so the run fails soon after the server dies; a retry_timeout that outlasts
    # the server's absence, for taking back what the run began.
    for key, value in {**options(endpoint), "max_retries": "1", "retry_timeout": "60"}.items():
        args += ["--storage-option", f"{key}={value}"]
    run = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Killed once a part has arrived, so the run knows its upload's id. (An upload whose
        # creation the server never answered cannot be aborted by the client: a store's
        # lifecycle rule removes those.)
        deadline = time.monotonic() + 120
        while not any(".part-" in name for name in pending_uploads(root)):
            assert run.poll() is None, "the run ended before its upload was seen: " + run.stderr.read()
            assert time.monotonic() < deadline, "no upload began"
            time.sleep(0.005)
        server.kill()
        server.wait(timeout=10)
        assert pending_uploads(root), "the upload was not pending when the server died"
        # Down for two seconds: the run's requests fail meanwhile.
        time.sleep(2)
        server, _ = start_s3_server(s3_server_bin, root, port)
        _, stderr = run.communicate(timeout=90)
    finally:
        run.kill()
        server.kill()
        server.wait(timeout=10)
    assert run.returncode == 2, stderr
    assert "uploading s3://lake/killed/part-00000-" in stderr and SECRET not in stderr, stderr
    assert "could not be" not in stderr, stderr
    assert pending_uploads(root) == [], "an upload is left pending"
    left = [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "killed" in str(p)]
    assert left == [], f"objects left: {left}"


@pytest.fixture(scope="module")
def gigabyte(tmp_path_factory):
    """An IPC input of about 1 GB: `id` (0..n), `k` = id × 7919 mod 10,000, and a padded text."""
    import polars as pl

    rows = 7_500_000
    path = tmp_path_factory.mktemp("gigabyte") / "input.arrow"
    frame = pl.select(id=pl.int_range(0, rows, dtype=pl.Int64)).with_columns(
        k=(pl.col("id") * 7919) % 10_000,
        v=pl.format("row {} of an input of a gigabyte, padded to one hundred and twenty bytes or so, "
                    "as a table of lineitems is", pl.col("id")),
    )
    frame.write_ipc(path, compression="uncompressed")
    assert path.stat().st_size > 1_000_000_000, path.stat().st_size
    return path, rows


@pytest.mark.parametrize("destinations", [64, 10_000])
def test_a_gigabyte_to_the_store_stays_within_the_memory_limit(s3_fs, gigabyte, partout_bin, destinations):
    """1 GB to 64 destinations (hash of k) and to 10,000 (a Hive dataset by k's values) in a
    store, with a memory limit of 128 MiB: the peak RSS measured from outside, the server in a
    process of its own, stays within it; every row lands once, in the destination of its key."""
    endpoint, root = s3_fs
    source, rows = gigabyte
    limit = 128 << 20
    prefix = f"gigabyte-{destinations}"
    split = ["--by", "k", "-n", "64"] if destinations == 64 else ["--partition-by", "k", "--max-partitions", "10000"]
    args = [partout_bin, "repartition", "--quiet", str(source), *split, "--memory-limit", str(limit),
            "-o", f"s3://lake/{prefix}"]
    for key, value in options(endpoint).items():
        args += ["--storage-option", f"{key}={value}"]
    code, peak, stderr = peak_rss(args)
    assert code == 0, stderr
    print(f"{destinations} destinations: peak RSS {peak >> 20} MiB, limit {limit >> 20} MiB")
    assert peak <= limit, f"peak RSS {peak >> 20} MiB past the limit of {limit >> 20} MiB"
    # Every object the manifest names, at its size; every row once, in the destination of its
    # key: the directory of its value, or one file for all rows of a key.
    import pyarrow.dataset as ds

    manifest = json.loads((root / "lake" / prefix / "_manifest.json").read_text())
    named = [d for d in manifest["destinations"] if d.get("files")]
    assert len(named) == destinations and manifest["output_rows"] == rows
    for entry in named:
        assert (root / "lake" / prefix / file_of(entry)).stat().st_size == entry["bytes"], entry
    files = [str(root / "lake" / prefix / file_of(entry)) for entry in named]
    hive = ds.partitioning(pa.schema([("k", pa.int64())]), flavor="hive")
    dataset = ds.dataset(files, format="parquet", partition_base_dir=str(root / "lake" / prefix),
                         partitioning=hive if destinations > 64 else None)
    got = dataset.to_table(columns=["id", "k", "__filename"])
    bounds = pa.compute.min_max(got["id"]).as_py()
    assert (got.num_rows, pa.compute.count_distinct(got["id"]).as_py(), bounds["min"], bounds["max"]) == (
        rows, rows, 0, rows - 1), "rows lost or repeated"
    # k as written (from the file, or from the directory's name) is the input's, for every row.
    product = pa.compute.multiply(got["id"], 7919)
    want_k = pa.compute.subtract(product, pa.compute.multiply(pa.compute.divide(product, 10_000), 10_000))
    assert pa.compute.all(pa.compute.equal(got["k"], want_k)).as_py(), "a row in another key's destination"
    homes = got.group_by("k").aggregate([("__filename", "count_distinct")])
    assert homes.num_rows == 10_000 and pa.compute.max(homes["__filename_count_distinct"]).as_py() == 1, \
        "a key in two destinations"
