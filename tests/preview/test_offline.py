"""The preview, and with it the program, opens no network connection: every example stack
previews inside a network namespace of its own, where nothing but a loopback that is down
exists (unshare(1) --net), and the same namespace refuses a connection (so the test can
fail)."""

import os
import shutil
import subprocess
import sys

import pytest

from preview.stack_file import EXAMPLE_STACKS
from tests.builders import PROJECT_DIR


def _isolated() -> list[str]:
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("unshare is not installed (apt-get install util-linux)")
    # As root a network namespace alone; otherwise inside a user namespace of its own.
    command = [unshare, "--net"] if os.geteuid() == 0 else [unshare, "--user", "--net"]
    probe = subprocess.run([*command, "true"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"network namespaces are unavailable here: {probe.stderr.strip()}")
    return command


def test_the_namespace_has_no_network():
    probe = ("import socket\n"
             "try:\n"
             "    socket.create_connection(('192.0.2.1', 443), timeout=5)\n"
             "except OSError as error:\n"
             "    print(type(error).__name__, error.errno)\n")
    done = subprocess.run([*_isolated(), sys.executable, "-c", probe], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("OSError 101"), done  # ENETUNREACH


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_every_example_stack_previews_without_a_network(stack, tmp_path):
    done = subprocess.run([*_isolated(), sys.executable, "-m", "preview", stack,
                           "--build-dir", str(tmp_path)], cwd=PROJECT_DIR, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / stack / "plan.json").exists()
