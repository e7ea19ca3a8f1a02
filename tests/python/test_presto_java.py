"""Presto's own page reader (presto-spi 0.296, tests/java/presto-reader, with the raw LZ4
codec of Presto's exchange) reads the pages partout's encoder wrote (crates/partout-format/examples/presto_samples.rs) and prints every
value; the printout must equal the one partout derived from the Arrow input."""
import os
import pathlib
import subprocess

SAMPLES = pathlib.Path(os.environ.get("PARTOUT_PRESTO_SAMPLES", "target/presto-samples"))
READER = pathlib.Path(os.environ.get("PARTOUT_PRESTO_READER", "tests/java/presto-reader"))


def read_with_presto(path):
    classpath = f"{READER / 'target' / 'classes'}{os.pathsep}{READER / 'target' / 'lib' / '*'}"
    return subprocess.run(
        ["java", "-cp", classpath, "partout.PageDump", str(path)],
        capture_output=True,
        text=True,
    )


def page_markers(pages):
    """The marker byte of every page (pages back to back, 21-byte headers)."""
    at, markers = 0, []
    while at < len(pages):
        markers.append(pages[at + 4])
        size = int.from_bytes(pages[at + 9 : at + 13], "little")
        at += 21 + size
    return markers


def test_presto_reads_every_value_partout_wrote():
    markers = page_markers((SAMPLES / "pages.bin").read_bytes())
    assert sum(m & 0x01 for m in markers) >= 2, "some pages must be LZ4-compressed"
    assert sum(1 for m in markers if m & 0x04) >= 2, "some pages must be checksummed"
    result = read_with_presto(SAMPLES / "pages.bin")
    assert result.returncode == 0, result.stderr
    got = result.stdout.splitlines()
    want = (SAMPLES / "expected.txt").read_text().splitlines()
    assert len(got) == len(want)
    assert sum(line.startswith("page ") for line in got) >= 100
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"line {i + 1}: Presto read {g!r}, partout wrote {w!r}"


def test_presto_checks_partouts_checksum(tmp_path):
    pages = bytearray((SAMPLES / "pages.bin").read_bytes())
    # The first page is checksummed; change one byte of its body.
    assert pages[4] & 0x04
    pages[30] ^= 0x01
    changed = tmp_path / "changed.bin"
    changed.write_bytes(pages)
    result = read_with_presto(changed)
    assert result.returncode != 0
    assert "checksum" in result.stderr
