"""What tests build stacks and plans with: stack configs as plain data and as the CLI passes
them, the offline preview engine (the same one `python -m preview` uses) and the example
stacks' plans, throwaway keys, and the checkers the tests run. tests/conftest.py keeps only
fixtures."""

import copy
import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from config.model import SECRET_KEYS
from config.types import public_key_of
from preview import credentials
from preview.engine import run_program
from preview.plan import Plan
from preview.stack_file import StackConfigFile, read_stack

PROJECT_DIR = Path(__file__).resolve().parent.parent

# CI (.ci/run) sets TEST_BUDGET=ci: the fuzzing's full budgets and every case of what a
# developer's run samples (tests/boot: a failed boot step on each kind of machine); a
# developer's `make test` runs short fixed budgets and one case of each.
CI_BUDGET = os.environ.get("TEST_BUDGET") == "ci"

# A throwaway key made for this test run.
TEST_PRIVATE_KEY = credentials.ssh_private_key()
# The SSH host key the test stacks' hosts pin (a stack without host keys is refused).
TEST_HOST_KEY = public_key_of(credentials.ssh_private_key())


# An age public key the stacks' snapshots are encrypted to (backup.recipients); its
# identity was thrown away: these tests never decrypt (tests/scripts/backup.bats does,
# with keys of its own).
TEST_AGE_RECIPIENT = "age1jrhjtn2rvyheaj4zywcdp6e2ugecmx9aveej8syxafje9qvah9nqe2cz9y"


def bare_metal_config(workers: int = 3, gpus: int = 4) -> dict:
    """A valid bare-metal stack config as plain data (key without namespace -> value)."""
    hosts = [{"name": "controller", "address": "192.168.2.1", "interface": "eno2",
              "role": "controller", "sshHostKey": TEST_HOST_KEY}]
    hosts += [
        {"name": f"gpu{i:03d}", "address": f"192.168.{2 + (i + 2) // 256}.{(i + 2) % 256}",
         "interface": "eno2", "gpus": gpus, "gpuModel": "NVIDIA-A100-SXM4-80GB",
         "sshHostKey": TEST_HOST_KEY}
        for i in range(workers)
    ]
    lan = "192.168.0.0/16" if workers > 250 else "192.168.2.0/24"
    return {
        "layout": "bare-metal",
        "clusterName": "test",
        "network": {"lanCidr": lan},
        "ssh": {"user": "ops"},
        "hosts": hosts,
        "storage": {"nfs": {"host": "controller", "path": "/srv/nfs"}},
        # Unused while the controller serves NFS itself (no snapshots); there for the tests
        # that move storage elsewhere.
        "backup": {"recipients": [TEST_AGE_RECIPIENT]},
        "sshPrivateKey": TEST_PRIVATE_KEY,
    }


# The bucket of the public service-account issuer in the hybrid stack tests.
ISSUER_BUCKET = "gpu-test-issuer"


def hybrid_config(workers: int = 2) -> dict:
    """A valid hybrid stack: on-prem GPU workers (the first one is the VPN gateway)."""
    values = bare_metal_config(workers=workers)
    values["layout"] = "hybrid"
    values["hosts"] = values["hosts"][1:]
    values["aws"] = {"region": "us-east-1", "adminCidrs": ["198.51.100.0/24"]}
    values["vpn"] = {"onpremGateway": "gpu000", "clientSourceCidrs": ["198.51.100.7/32"]}
    values["storage"] = {"efs": {"anonymousNfs": True}}
    return values


def hybrid_pools_config() -> dict:
    """A valid hybrid stack with RKE2 (the cloud controller manager and cluster-autoscaler
    run), on-prem GPU workers and two EC2 pools in the VPC: one on-demand, one spot."""
    values = hybrid_config()
    values["kubernetes"] = {"distribution": "rke2"}
    values["pools"] = [
        {"name": "burst", "instanceType": "g5.12xlarge", "count": 1, "min": 0, "max": 4,
         "gpus": 4, "gpuModel": "NVIDIA-A10G"},
        {"name": "spot", "instanceType": "g5.2xlarge", "count": 0, "min": 0, "max": 8,
         "gpus": 1, "gpuModel": "NVIDIA-A10G", "capacity": "spot",
         "instanceTypes": ["g5.4xlarge"]},
    ]
    return values


def cloud_config() -> dict:
    """A valid cloud stack: a GPU pool and EFS, no on-prem hosts."""
    return {
        "layout": "cloud",
        "clusterName": "test",
        "aws": {"region": "us-west-2", "adminCidrs": ["198.51.100.0/24"]},
        "pools": [{"name": "gpu", "instanceType": "g5.12xlarge", "count": 2, "gpus": 4}],
        "storage": {"efs": {"anonymousNfs": True}},
        "backup": {"recipients": [TEST_AGE_RECIPIENT]},
        "sshPrivateKey": TEST_PRIVATE_KEY,
    }


def as_cli_config(values: dict, secret: tuple = SECRET_KEYS,
                  stack: str = "test") -> StackConfigFile:
    """What the CLI hands the program: strings, objects as JSON, secret keys listed."""
    config = {
        f"gpu-cluster:{key}": value if isinstance(value, str) else json.dumps(value)
        for key, value in values.items()
    }
    secret_keys = [f"gpu-cluster:{key}" for key in secret if key in values]
    return StackConfigFile(project="gpu-cluster", stack=stack, config=config,
                           secret_keys=secret_keys)


def preview(values: dict, stack: str = "") -> Plan:
    # Under pytest-xdist each worker previews its own stack name: the program writes
    # Kubeflow's overlays under build/<stack>/, and two workers' settings would mix there.
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    stack = stack or (f"test-{worker}" if worker else "test")
    return run_program(PROJECT_DIR, as_cli_config(values, stack=stack))


_SHARED_PLANS: dict[str, Plan] = {}


def shared_preview(values: dict) -> Plan:
    """preview(values), made once per test process for equal values, for tests that only
    read the plan (a test comparing two runs, or after a change, calls preview)."""
    key = json.dumps(values, sort_keys=True)
    if key not in _SHARED_PLANS:
        _SHARED_PLANS[key] = preview(copy.deepcopy(values))
    return _SHARED_PLANS[key]


@functools.cache
def example_plan(stack: str) -> Plan:
    """The example stack's plan, previewed once per test process, for tests that only read
    it (a test comparing two runs of a stack previews it itself)."""
    return run_program(PROJECT_DIR, read_stack(PROJECT_DIR, stack))


# The seed the build records are made under (tests/preview/test_reproducible.py): every
# throwaway key, token and certificate of a build is drawn from it.
BUILD_SEED = "gpu-cluster"


class SeededBuilds:
    """build/<stack>/ of the example stacks as `python -m preview STACK --seed gpu-cluster`
    writes it, each stack written once per test process below `root`, for tests that only
    read it (the build records; checkov scans a copy)."""

    def __init__(self, root: Path):
        self.root, self._built = root, set()

    def __call__(self, stack: str) -> Path:
        if stack not in self._built:
            from preview.__main__ import main

            assert main([stack, "--quiet", "--seed", BUILD_SEED,
                         "--build-dir", str(self.root)]) == 0
            self._built.add(stack)
        return self.root / stack


# `make test` as root sets this once tests/debian/setup.sh has installed every package the
# tests run: on such a machine nothing may skip (tests/conftest.py fails a skip, giving its
# reason). GPU_CLUSTER_TESTS_WITHOUT_DEBIAN=1 is the explicit opt-out (docs/tests.md).
NO_SKIPS = os.environ.get("GPU_CLUSTER_NO_SKIPS") == "1"


def require_tool(name: str) -> str:
    """Path of a checker; a missing one skips with a reason (CI installs them all)."""
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if not found:
        pytest.skip(f"{name} is not installed (pip install -r requirements-dev.txt)")
    return found


def run_checked(*command: str, timeout: float = 30) -> str:
    """`command`'s stdout; a failure raises, naming the command and what it printed."""
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}): "
                           f"{result.stderr.strip() or result.stdout.strip()}")
    return result.stdout


# Printed by every preview of bare_metal_config (its controller serves NFS itself).
NO_BACKUPS = "no backups of the control plane"


def own_warnings(plan: Plan) -> list[str]:
    """The plan's warnings but the one every preview prints about images pinned by tag
    only (config/image_pins.py) and bare_metal_config's about backups (config/warnings.py)."""
    return [warning for warning in plan.warnings
            if "pinned by tag only" not in warning and not warning.startswith(NO_BACKUPS)]
