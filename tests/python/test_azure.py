"""Azure Blob Storage, the same way as S3: Azurite (Microsoft's emulator, from npm) on
127.0.0.1, started by the tests. A dataset written to `az://` is read back by Azure's own
client (azure-storage-blob) equal to the same run on disk, committed with its manifest and
`_SUCCESS`; inputs are read from the container; a run refused leaves nothing."""

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import partout
from runs import file_of

# Azurite's well-known account (object_store's `azure_storage_use_emulator` uses it too).
ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@pytest.fixture(scope="module")
def azurite(tmp_path_factory):
    binary = os.environ.get("PARTOUT_AZURITE")
    if not binary:
        pytest.fail("PARTOUT_AZURITE names Azurite's azurite-blob (./run-tests installs it)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    location = tmp_path_factory.mktemp("azurite")
    server = subprocess.Popen(
        [binary, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", str(location),
         "--skipApiVersionCheck", "--silent"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert server.poll() is None, "Azurite ended"
                assert time.monotonic() < deadline, "Azurite did not start"
                time.sleep(0.1)
        from azure.storage.blob import BlobServiceClient

        client = BlobServiceClient(
            f"{endpoint}/{ACCOUNT}", credential={"account_name": ACCOUNT, "account_key": KEY}
        ).get_container_client("lake")
        client.create_container()
        # object_store's emulator mode finds Azurite here.
        os.environ["AZURITE_BLOB_STORAGE_URL"] = endpoint
        yield client
    finally:
        os.environ.pop("AZURITE_BLOB_STORAGE_URL", None)
        server.kill()
        server.wait(timeout=10)


OPTIONS = {"azure_storage_use_emulator": "true"}


def table(rows):
    return pa.table(
        {
            "k": pa.array([(i * 7919) % 1009 for i in range(rows)], pa.int64()),
            "year": pa.array([2020 + i % 3 for i in range(rows)], pa.int32()),
            "v": pa.array([f"value {i}" for i in range(rows)], pa.string()),
        }
    )


def test_a_dataset_written_to_azure_reads_back_with_azures_client(azurite, tmp_path):
    data = table(20_000)
    manifest = partout.write_dataset(data, "az://lake/hive", partition_by="year", storage_options=OPTIONS)
    local = partout.write_dataset(data, tmp_path / "hive", partition_by="year")
    names = sorted(b.name for b in azurite.list_blobs(name_starts_with="hive/"))
    files = [file_of(d) for d in manifest["destinations"]]
    assert names == sorted([f"hive/{f}" for f in files] + ["hive/_SUCCESS", "hive/_manifest.json"])
    stored = json.loads(azurite.download_blob("hive/_manifest.json").readall())
    assert stored == manifest
    by_year = {file_of(d).split("/")[0]: d for d in local["destinations"]}
    for d in manifest["destinations"]:
        path = tmp_path / "copy.parquet"
        path.write_bytes(azurite.download_blob(f"hive/{file_of(d)}").readall())
        got = pq.read_table(path)
        want = pq.read_table(tmp_path / "hive" / file_of(by_year[file_of(d).split("/")[0]]))
        assert got.sort_by("v").equals(want.sort_by("v")), file_of(d)


def test_inputs_are_read_from_azure_and_a_refused_run_leaves_nothing(azurite, tmp_path):
    data = table(12_000)
    source = tmp_path / "in.parquet"
    pq.write_table(data, source, row_group_size=2000)
    azurite.upload_blob("in/part-0.parquet", source.read_bytes())
    run = dict(by="k", format="ipc", threads=2)
    remote = partout.repartition("az://lake/in/", tmp_path / "remote", 3, storage_options=OPTIONS, **run)
    here = partout.repartition(source, tmp_path / "here", 3, **run)
    assert remote["input_rows"] == 12_000
    for p in range(3):
        got = partout.read(tmp_path / "remote", destination=p)
        want = partout.read(tmp_path / "here", destination=p)
        assert got.num_rows > 0 and got.sort_by("v").equals(want.sort_by("v")), f"destination {p}"
    with pytest.raises(partout.PartoutError, match="more than 10 distinct values"):
        partout.write_dataset(data, "az://lake/refused", partition_by="k", max_partitions=10,
                              storage_options=OPTIONS)
    assert not list(azurite.list_blobs(name_starts_with="refused/"))
