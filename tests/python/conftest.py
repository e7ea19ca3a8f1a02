"""What ./run-tests hands the Python tests: the binaries it built, named by environment
variables. A test that needs one fails when it is missing (never skips)."""

import os

import pytest


def required(variable, what):
    value = os.environ.get(variable)
    if not value:
        pytest.fail(f"{variable} names {what} (./run-tests sets it)")
    return value


@pytest.fixture(scope="session")
def partout_bin():
    """The `partout` binary."""
    return required("PARTOUT_BIN", "the partout binary")


@pytest.fixture(scope="session")
def s3_server_bin():
    """partout-job's s3_server example: an S3 server (s3s-fs) on 127.0.0.1."""
    return required("PARTOUT_S3_SERVER", "partout-job's s3_server example")


@pytest.fixture(scope="session")
def datafusion_bench_bin():
    """partout-datafusion's datafusion_bench example (the dev profile's, as the tests build it)."""
    return required("PARTOUT_DATAFUSION_BENCH", "partout-datafusion's datafusion_bench example")


@pytest.fixture(scope="session")
def ballista_bench_bin():
    """partout-ballista's ballista_bench example (the dev profile's, as the tests build it)."""
    return required("PARTOUT_BALLISTA_BENCH", "partout-ballista's ballista_bench example")
