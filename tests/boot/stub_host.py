"""The host the step scripts see in a boot test: the bats suite's fake root and stub
commands (tests/scripts/helpers.bash `setup_host`, tests/scripts/stubs/stub), set up by
stub_host.bash. Every host path of a script goes through GPU_CLUSTER_ROOT, every command
it calls by name is a stub that logs the call."""

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.boot.cloud_init import SYSTEMD_PATH

STUB_HOST_SCRIPT = Path(__file__).with_name("stub_host.bash")


@dataclass(frozen=True)
class StubHost:
    env: dict[str, str]  # GPU_CLUSTER_ROOT, the stubs' state and PATH with the stubs first
    root: Path  # the fake host root

    def calls(self) -> list[str]:
        """The stub calls so far, one "name args" line each."""
        return Path(self.env["STUB_CALLS"]).read_text().splitlines()


def stub_host(directory: Path, ssm_parameters: Mapping[tuple[str, str], str]) -> StubHost:
    """A stubbed host in `directory`; `ssm_parameters` maps (region, name) to the value the
    stubbed SSM reader returns."""
    values = [item for (region, name), value in ssm_parameters.items()
              for item in (region, name, value)]
    # The stubs go first on the PATH systemd gives cloud-init.
    result = subprocess.run(["/bin/bash", str(STUB_HOST_SCRIPT), str(directory), *values],
                            env={"PATH": SYSTEMD_PATH}, capture_output=True, text=True,
                            timeout=60)
    if result.returncode != 0:
        raise RuntimeError(f"stub_host.bash failed: {result.stderr}")
    env = dict(item.split("=", 1) for item in result.stdout.split("\0") if item)
    return StubHost(env=env, root=Path(env["GPU_CLUSTER_ROOT"]))
