"""The preview explains itself: what `pulumi up` does to each machine (summary.md and the
screen), waves explained, provider-made values shown as known after `pulumi up`, and
`--quiet` with only the machines, the warnings and the secrets to set. The kernel
arguments the summary names are held against the real prepare-host.sh in
tests/scripts/prepare-host.bats."""

import json
import re

from preview.host_summary import host_summaries, summary_markdown
from preview.plan import UNKNOWN
from preview.report import quiet_report, shown_outputs, tree
from tests.builders import example_plan


def by_name(stack: str) -> dict:
    return {summary.name: summary for summary in host_summaries(example_plan(stack))}


def test_each_machine_is_summarised_with_its_steps_in_the_order_they_run():
    plan = example_plan("prod")
    hosts = by_name("prod")
    assert sorted(hosts) == ["control-plane", "gpu01", "gpu02", "vpn-gw"]
    gpu01 = hosts["gpu01"]
    steps = [s for s in gpu01.steps if s in ("preflight", "prepare-host", "install-nvidia",
                                             "reboot-if-needed", "verify-boot", "join-worker")]
    assert steps == ["preflight", "prepare-host", "install-nvidia", "reboot-if-needed",
                     "verify-boot", "join-worker"]
    lines = "\n".join(gpu01.lines())
    assert "gpu01 (192.168.10.11, worker, 8 GPUs)" in lines
    assert "kernel arguments: intel_iommu=off amd_iommu=off" in lines
    assert "Fabric Manager and NSCQ 580" in lines and "NVIDIA driver 580" in lines
    assert "reboot: on the first `up` (kernel arguments and the NVIDIA driver)" in lines
    assert "taints: nvidia.com/gpu=present:NoSchedule" in lines
    markdown = summary_markdown(plan)
    assert all(f"## {name}" in markdown for name in hosts)


def test_the_summary_says_what_each_layout_does_differently():
    lab = by_name("lab")
    assert lab["moscow"].kernel_args() == []
    assert lab["controller"].storage().startswith("serves NFS /srv/nfs/gpu-cluster to "
                                                  "192.168.2.2/32")
    assert "taints: CriticalAddonsOnly=true:NoExecute" in "\n".join(
        by_name("rke2")["control-plane"].lines())
    # Cloud pools keep the image's driver: the summary does not claim to install one.
    assert by_name("dev")["h100"].packages()[0] == (
        "no NVIDIA driver: the one on the machine is kept")


def test_provider_made_values_are_shown_as_known_after_pulumi_up():
    plan = example_plan("prod")
    outputs = shown_outputs(plan)
    assert outputs["apiEndpoint"] == f"https://{UNKNOWN}:6443"
    assert outputs["kubeflowTlsCertificate"] == UNKNOWN
    assert outputs["backupLocation"].startswith(f"s3://{UNKNOWN}/")
    text = json.dumps(outputs)
    assert not [made for made in plan.provider_made if made in text]
    assert not re.search(r"\b(fs|i|sg|vpc|eipalloc)-[0-9a-f]{17}\b", tree(plan))


def test_every_row_that_pulumi_runs_as_one_step_has_its_wave():
    text = tree(example_plan("prod"))
    assert "wave N: what starts once everything it waits for is done" in text
    rows = [line for line in text.splitlines() if "─ kubernetes:kustomize/v2:Directory" in line]
    assert rows and all(re.search(r"\(wave \d+\)$", row) for row in rows), rows


def test_quiet_shows_the_machines_the_warnings_and_the_secrets_only():
    text = quiet_report(example_plan("prod"))
    assert text.startswith("Machines (what `pulumi up` does to each")
    assert "Warnings:" in text and "Secrets the preview uses placeholders for" in text
    for absent in ("Resources:", "Outputs:", "BEGIN CERTIFICATE", "command:remote:Command"):
        assert absent not in text
