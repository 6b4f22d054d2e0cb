"""`python -m doctor --drift BUILD`: the steps that can check, run as `sudo -n bash -s --
check` of the envelopes the program renders, on a throwaway host root with the bats stubs
(tests/scripts/stubs/stub) behind a fake ssh; the host in sync passes, a drifted one is a
problem naming what drifted, nothing on the host changes, and an envelope holding a preview
placeholder is never sent."""

import hashlib
import json
import os
import shutil
import subprocess

import pytest

from components.common.step_text import render_envelope
from components.hosts.steps import PREPARE_HOST, VERIFY_BOOT
from components.network.vpn_bridge import ROUTE_TO_VPC
from doctor.checks import drift as drift_checks
from doctor.drift import Drift, Envelope, Result, as_record, envelopes, parse_record
from doctor.findings import OK, PROBLEM, UNCHECKED
from tests.builders import PROJECT_DIR
from tests.doctor.cluster import FIXTURES
from tests.doctor.test_command import run_doctor, write_outputs

STUB = PROJECT_DIR / "tests" / "scripts" / "stubs" / "stub"
STUB_COMMANDS = ("apt-get", "apt-mark", "dpkg-query", "hostname", "ip", "modprobe", "swapoff",
                 "sysctl", "systemctl", "update-grub")
PREPARE_ENV = {"DISABLE_IOMMU": "true", "DISABLE_CPU_MITIGATIONS": "false",
               "EXTRA_KERNEL_ARGS": "pci=realloc", "INOTIFY_MAX_USER_INSTANCES": "2280",
               "INOTIFY_MAX_USER_WATCHES": "1255360", "INSTALL_NFS_CLIENT": "false"}
ROUTE_ENV = {"VPC_CIDR": "10.20.0.0/16", "GATEWAY_ADDRESS": "192.168.2.4", "TUNNEL_CIDR": ""}
SYSCTL_FILE = "etc/sysctl.d/90-gpu-cluster.conf"

@pytest.fixture
def host(tmp_path, monkeypatch, fake_ssh):
    """moscow's root, stubs and ssh; its build folder with three envelopes, two that check."""
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    root, state = tmp_path / "root", tmp_path / "state"
    for folder in ("proc", "sys/module", "etc/default/grub.d", "etc/systemd/system", "var/run"):
        (root / folder).mkdir(parents=True)
    (root / "proc/cmdline").write_text("BOOT_IMAGE=/vmlinuz ro quiet\n")
    # prepare-host asks os/lib.sh the host's family (its kernel arguments, its packages).
    (root / "etc/os-release").write_text('ID=ubuntu\nVERSION_ID="24.04"\n')
    (root / "proc/swaps").write_text("Filename Type Size Used Priority\n")
    state.mkdir()
    for command in STUB_COMMANDS:
        (fake_ssh / command).symlink_to(STUB)
    for name, value in {"STUB_PATH": os.environ["PATH"], "GPU_CLUSTER_ROOT": str(root),
                        "STUB_STATE": str(state), "STUB_CALLS": str(state / "calls.log")}.items():
        monkeypatch.setenv(name, value)
    build = tmp_path / "build"
    (build / "hosts" / "moscow").mkdir(parents=True)
    for name, script, env in (("02-prepare-host", PREPARE_HOST, PREPARE_ENV),
                              ("05-verify-boot", VERIFY_BOOT, {"GPU_COUNT": "2"}),
                              ("06-route-to-vpc", ROUTE_TO_VPC, ROUTE_ENV)):
        text = render_envelope("moscow", name[3:], script, env)
        (build / "hosts" / "moscow" / f"{name}.sh").write_text(text)
        if script.checks:
            run = subprocess.run(["bash", "-s", "--", "create"], input=text, text=True,
                                 capture_output=True)
            assert run.returncode == 0, run.stderr
    # Rebooted into the kernel arguments prepare-host configured.
    (root / "proc/cmdline").write_text("BOOT_IMAGE=/vmlinuz ro intel_iommu=off amd_iommu=off "
                                       "pci=realloc\n")
    return tmp_path


def tree(path):
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            if p.is_file() and not p.is_symlink() else "" for p in sorted(path.rglob("*"))
            if p.name != "calls.log"}


def drift_findings(done):
    return [f for f in json.loads(done.stdout)["findings"] if f["check"] == "host-drift"]


def test_drift_over_ssh(host, served, cluster, authority):
    outputs, _ = write_outputs(host, cluster, authority, served.url)
    args = ("--outputs", str(outputs), "--json", "--ssh", "--ssh-user", "ubuntu",
            "--drift", str(host / "build"), "--host-outputs", str(host / "recorded"))
    before = tree(host / "root"), tree(host / "state")
    healthy = run_doctor(*args)
    assert [(f["subject"], f["verdict"], f["message"]) for f in drift_findings(healthy)] == [
        ("host moscow", OK, "prepare-host: in sync with the config"),
        ("host moscow", OK, "route-to-vpc: in sync with the config")], healthy.stderr
    assert (tree(host / "root"), tree(host / "state")) == before
    checks = [c for c in (host / "ssh.log").read_text().splitlines() if c.endswith("check")]
    # verify-boot cannot check: never sent.
    assert len(checks) == 2 and all("ubuntu@192.168.2.2 -- sudo -n bash -s -- check" in c
                                    for c in checks)

    sysctls = host / "root" / SYSCTL_FILE
    sysctls.write_text(sysctls.read_text().replace("= 1255360", "= 8192"))
    subprocess.run([str(host / "bin" / "ip"), "route", "del", "10.20.0.0/16"], check=True)
    before = tree(host / "root"), tree(host / "state")
    drifted = run_doctor(*args)
    assert drifted.returncode == 1
    assert (tree(host / "root"), tree(host / "state")) == before
    found = {f["message"].split(" ")[0]: f for f in drift_findings(drifted)}
    assert found["prepare-host"]["verdict"] == PROBLEM
    assert found["prepare-host"]["message"].startswith(
        "prepare-host drifted from the config: /etc/sysctl.d/90-gpu-cluster.conf differs from "
        "what the step writes; /etc/sysctl.d/90-gpu-cluster.conf: - "
        "fs.inotify.max_user_watches = 8192; /etc/sysctl.d/90-gpu-cluster.conf: + "
        "fs.inotify.max_user_watches = 1255360; the step would run: sysctl --system")
    assert found["prepare-host"]["fix"].startswith(
        f"re-apply the step as `pulumi up` runs it: ssh 192.168.2.2 sudo -n bash -s -- create "
        f"< {host / 'build/hosts/moscow/02-prepare-host.sh'}")
    assert found["route-to-vpc"]["verdict"] == PROBLEM
    assert "no route to 10.20.0.0/16 via 192.168.2.4" in found["route-to-vpc"]["message"]

    # What --ssh recorded, read again without SSH: the same verdicts.
    for file in (FIXTURES / "hosts" / "moscow").iterdir():
        shutil.copy(file, host / "recorded" / "moscow" / file.name)
    recorded = run_doctor("--outputs", str(outputs), "--json", "--host-outputs",
                          str(host / "recorded"), "--drift", str(host / "build"))
    assert recorded.returncode == 1
    assert drift_findings(recorded) == drift_findings(drifted)
    (host / "recorded/moscow/check-prepare-host.txt").write_text("exit 0\n")
    (host / "recorded/moscow/check-route-to-vpc.txt").write_text("exit 0\n")
    assert run_doctor("--outputs", str(outputs), "--host-outputs", str(host / "recorded"),
                      "--drift", str(host / "build")).returncode == 0


def test_envelope_with_a_placeholder_is_never_sent(host, served, cluster, authority):
    outputs, _ = write_outputs(host, cluster, authority, served.url)
    unknown = render_envelope("moscow", "route-to-vpc", ROUTE_TO_VPC,
                              {**ROUTE_ENV, "GATEWAY_ADDRESS": "[known after pulumi up]"})
    (host / "build/hosts/moscow/06-route-to-vpc.sh").write_text(unknown)
    done = run_doctor("--outputs", str(outputs), "--json", "--ssh", "--ssh-user", "ubuntu",
                      "--drift", str(host / "build"))
    [refused] = [f for f in drift_findings(done) if "route-to-vpc" in f["message"]]
    assert refused["verdict"] == UNCHECKED
    assert refused["message"] == (
        f"cannot check route-to-vpc: its envelope {host / 'build/hosts/moscow/06-route-to-vpc.sh'}"
        " has inputs known only at deploy time ([known after pulumi up]), so it is not sent")
    checks = [c for c in (host / "ssh.log").read_text().splitlines() if c.endswith("check")]
    assert len(checks) == 1  # prepare-host only


def test_recorded_checks_read_and_judged(cluster, tmp_path):
    build = tmp_path / "build" / "hosts" / "moscow"
    build.mkdir(parents=True)
    (build / "02-prepare-host.sh").write_text(render_envelope("moscow", "prepare-host",
                                                              PREPARE_HOST, PREPARE_ENV))
    (build / "03-verify-boot.sh").write_text(render_envelope("moscow", "verify-boot",
                                                             VERIFY_BOOT, {"GPU_COUNT": "2"}))
    found = envelopes(str(tmp_path / "build"))
    assert [e.step for e in found["moscow"]] == ["prepare-host"]
    record = as_record(Result(3, ("kernel module br_netfilter is not loaded",)))
    assert record == "exit 3\ndrift: kernel module br_netfilter is not loaded\n"
    assert parse_record(record) == Result(3, ("kernel module br_netfilter is not loaded",))
    assert parse_record("drift: no exit line\n") is None
    envelope = found["moscow"][0]
    for result, verdict, message in (
            (Result(0), OK, "prepare-host: in sync with the config"),
            (Result(3, ("swap is on",)), PROBLEM, "prepare-host drifted from the config: "
                                                  "swap is on"),
            (Result(1, (), "user 'ops' does not exist"), UNCHECKED,
             "prepare-host: its check failed with exit code 1: user 'ops' does not exist"),
            (None, UNCHECKED, "prepare-host: not collected (check-prepare-host.txt)")):
        context = cluster.context()
        context.drift = Drift({"moscow": [envelope]}, {"moscow": {"prepare-host": result}})
        [finding] = drift_checks.host_drift(context)
        assert (finding.verdict, finding.subject, finding.message) == \
            (verdict, "host moscow", message)
    # Without --drift nothing is said; a placeholder is refused whatever was collected.
    assert drift_checks.host_drift(cluster.context()) == []
    secret = Envelope("moscow", "authorized-keys", build / "06-authorized-keys.sh",
                      "export AUTHORIZED_KEYS='[secret]'\n")
    context = cluster.context()
    context.drift = Drift({"moscow": [secret]}, {})
    [finding] = drift_checks.host_drift(context)
    assert finding.verdict == UNCHECKED and "known only at deploy time ([secret])" in \
        finding.message
