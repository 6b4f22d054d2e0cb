"""One list of the hosts' operating systems, contract/host_os.py: it is preflight's input,
`gpu-cluster init` reads hosts against it, and os/lib.sh's family case knows every ID in it
(and the RHEL 9 family, which preflight recognises and refuses until the steps set it up)."""

import subprocess

import pytest

from cli.discover import HostFacts
from cli.init_stack import unsuitable
from components.common.step_text import step_inputs, whole_text
from contract import host_os
from preview.engine import unwrap_secrets
from tests.builders import PROJECT_DIR, bare_metal_config, shared_preview

OS_LIB = PROJECT_DIR / "components/scripts/os/lib.sh"


def _os_lib(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", f'source "$1"; shift; {code}', "_", str(OS_LIB), *args],
                          capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})


def test_preflight_gets_the_supported_list_as_its_input():
    plan = shared_preview(bare_metal_config())
    for host in ("controller", "gpu000"):
        stdin = whole_text(unwrap_secrets(plan.named(f"{host}-preflight").inputs["stdin"]))
        given = step_inputs(stdin)["SUPPORTED_OS"]
        assert [tuple(word.split(":")) for word in given.split()] == list(host_os.SUPPORTED_OS)
        assert "ubuntu:22.04 ubuntu:24.04 rocky:9 almalinux:9 rhel:9" == given


@pytest.mark.parametrize("os_id, release", host_os.SUPPORTED_OS + host_os.EL9)
def test_os_lib_knows_the_family_of_every_listed_os(os_id, release):
    # A point release too: what a host of a major-only entry (rhel 9) reports (9.4).
    for version in (release, f"{release}.4"):
        found = _os_lib('os_family_of "$1" "$2"', os_id, version)
        assert found.returncode == 0 and found.stdout.strip() in ("ubuntu", "el9"), found


def test_os_lib_names_each_os_as_the_program_does():
    for os_id, name in host_os.OS_NAMES.items():
        assert _os_lib('os_name "$1"', os_id).stdout == name + "\n"
    assert {os_id for os_id, _ in host_os.SUPPORTED_OS + host_os.EL9} <= set(host_os.OS_NAMES)


def _facts(os_id: str, version: str, name: str) -> HostFacts:
    return HostFacts(ssh_address="192.0.2.7", host_key="ssh-ed25519 AAAA", hostname="gpu07",
                     os_id=os_id, os_version=version, os_name=name, sudo=True)


def test_init_reports_what_it_found_and_what_is_supported():
    assert unsuitable(_facts("ubuntu", "22.04", "Ubuntu 22.04.2 LTS")) == []
    assert unsuitable(_facts("rocky", "9.4", "Rocky Linux 9.4 (Blue Onyx)")) == []
    supported = "Ubuntu 22.04, Ubuntu 24.04, Rocky Linux 9, AlmaLinux 9, RHEL 9"
    assert unsuitable(_facts("rhel", "8.10", "Red Hat Enterprise Linux 8.10 (Ootpa)")) == [
        f"OS is Red Hat Enterprise Linux 8.10 (Ootpa) (rhel 8.10); supported: {supported}"]
    assert unsuitable(_facts("", "", "")) == [f"OS is unknown (? ?); supported: {supported}"]


def test_the_rhel_9_family_is_supported_and_nothing_older():
    assert all(host_os.os_supported(os_id, "9.4") for os_id in ("rocky", "almalinux", "rhel"))
    assert not host_os.os_supported("rhel", "8.10")
    assert not host_os.os_supported("rhel", "90.1")
    assert not host_os.os_supported("centos", "9")
    assert host_os.supported_os_input() == (
        "ubuntu:22.04 ubuntu:24.04 rocky:9 almalinux:9 rhel:9")
    assert host_os.supported_os_names() == (
        "Ubuntu 22.04, Ubuntu 24.04, Rocky Linux 9, AlmaLinux 9, RHEL 9")


def test_the_readme_names_the_supported_list():
    readme = " ".join((PROJECT_DIR / "README.md").read_text().split())
    assert f"- **Hosts** (bare-metal and hybrid): {host_os.supported_os_names()}, as `preflight` reads" in readme
