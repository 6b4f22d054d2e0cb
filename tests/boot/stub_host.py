"""The host the step scripts see in a boot test: the bats suite's fake root and stub
commands (tests/scripts/helpers.bash `setup_host`, tests/scripts/stubs/stub), set up by
stub_host.bash. Every host path of a script goes through GPU_CLUSTER_ROOT, every command
it calls by name is a stub that logs the call."""

import re
import shutil
import subprocess
import uuid
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

    def reboot(self) -> None:
        """What a reboot does to the host: a new boot id, /var/run emptied (a tmpfs), the
        kernel arguments prepare-host configured active, nouveau gone and the NVIDIA driver
        loaded, iptables rules gone."""
        root, state = self.root, Path(self.env["STUB_STATE"])
        (root / "proc/sys/kernel/random/boot_id").write_text(f"{uuid.uuid4()}\n")
        shutil.rmtree(root / "var/run", ignore_errors=True)
        (root / "var/run").mkdir()
        dropin = root / "etc/default/grub.d/90-gpu-cluster.cfg"
        configured = re.search(r'^GRUB_CMDLINE_LINUX_DEFAULT="\$\{GRUB_CMDLINE_LINUX_DEFAULT:-\} '
                               r'(.*)"$', dropin.read_text(), re.M) if dropin.exists() else None
        (root / "proc/cmdline").write_text(
            "BOOT_IMAGE=/vmlinuz-6.8.0-79-generic root=UUID=1b2c ro quiet splash "
            f"{configured[1] if configured else ''}\n")
        shutil.rmtree(root / "sys/module/nouveau", ignore_errors=True)
        (root / "sys/module/nvidia").mkdir(parents=True, exist_ok=True)
        if not (state / "nvidia-driver-version").exists():
            (state / "nvidia-driver-version").write_text("580.95.05\n")
        (state / "iptables").write_text("")


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
