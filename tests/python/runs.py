"""Running partout in the tests and reading what it wrote: a command's peak RSS measured from
outside, each destination's files by name."""

import subprocess
import sys

# Runs a command and prints its exit code and peak RSS in KiB. A small process of its own:
# a child's ru_maxrss starts from the RSS of the process that spawned it, so it is not
# spawned from the tests' Python, which holds pyarrow.
PEAK_RSS = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[1:])
_, status, usage = os.wait4(child.pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def peak_rss(args, timeout=600):
    """Runs `args`: its exit code, its peak RSS in bytes, and its stderr."""
    done = subprocess.run([sys.executable, "-I", "-S", "-c", PEAK_RSS, *args], capture_output=True,
                          text=True, timeout=timeout)
    code, peak_kib = map(int, done.stdout.split())
    return code, peak_kib * 1024, done.stderr


def file_of(entry):
    """The name of a destination's one file (a run without rollover writes one a destination)."""
    files = entry["files"]
    assert len(files) == 1, f"one file a destination: {entry}"
    return files[0]["name"]
