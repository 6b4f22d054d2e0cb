"""Every SSH connection the example stacks make checks the host key, the bastion's too: a
remote Command or upload of pulumi-command with no `hostKey` accepts any key
(provider/pkg/provider/remote/connection.go:88-97 at v1.2.1). A stack that opts out with
ssh.acceptAnyHostKey is warned about at preview, as is a shared host without CPU
mitigations."""

import copy

import pytest

from preview.engine import unwrap_secrets
from preview.stack_file import EXAMPLE_STACKS
from tests.builders import bare_metal_config, example_plan, shared_preview

SSH_TYPES = ("command:remote:Command", "command:remote:CopyToRemote")


def _connections(plan) -> list[dict]:
    return [unwrap_secrets(resource.inputs["connection"])
            for kind in SSH_TYPES for resource in plan.of_type(kind)]


def _unchecked(connection: dict) -> bool:
    proxy = connection.get("proxy")
    return not connection.get("hostKey") or (proxy is not None and not proxy.get("hostKey"))


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_every_ssh_connection_of_the_example_stacks_checks_the_host_key(stack):
    connections = _connections(example_plan(stack))

    assert connections
    unchecked = [c["host"] for c in connections if _unchecked(c)]
    assert not unchecked, f"{stack}: {len(unchecked)} of {len(connections)} SSH steps " \
                          f"accept any host key: {sorted(set(unchecked))}"


def test_the_lab_pins_its_bastion_and_each_host_to_its_own_key():
    connections = _connections(example_plan("lab"))
    by_host = {c["host"]: c["hostKey"] for c in connections}
    # One key per host, never one host's key for another.
    assert len(set(by_host.values())) == len(by_host) == 4
    assert {c["proxy"]["host"] for c in connections} == {"203.0.113.10"}
    assert len({c["proxy"]["hostKey"] for c in connections}) == 1


def _opted_out() -> dict:
    values = bare_metal_config(workers=2)
    for host in values["hosts"]:
        del host["sshHostKey"]
    values["ssh"] = {"user": "ops", "acceptAnyHostKey": True,
                     "bastion": {"host": "203.0.113.10"}}
    values["tuning"] = {"disableCpuMitigations": True}
    values["access"] = {"teams": [{"name": "vision"}, {"name": "nlp"}]}
    return values


def test_the_preview_warns_about_hosts_without_host_keys_and_shared_hosts_without_mitigations():
    plan = shared_preview(_opted_out())

    # What the warning says is what the connections do.
    assert all(_unchecked(c) for c in _connections(plan))
    [ssh] = [w for w in plan.warnings if "ssh.acceptAnyHostKey" in w]
    assert ssh.startswith("gpu-cluster:ssh.acceptAnyHostKey is true: SSH to hosts "
                          "controller, gpu000, gpu001 (hosts[].sshHostKey) and the bastion "
                          "(ssh.bastion.hostKey) accepts any host key")
    [tuning] = [w for w in plan.warnings if "tuning.disableCpuMitigations" in w]
    # The controller runs no workloads: only the workers are shared.
    assert tuning.startswith("gpu-cluster:tuning.disableCpuMitigations is true on gpu000, "
                             "gpu001, which teams vision, nlp share")


def test_no_host_warning_for_a_stack_with_host_keys_and_mitigations_on():
    values = copy.deepcopy(_opted_out())
    values["hosts"] = bare_metal_config(workers=2)["hosts"]
    values["ssh"]["bastion"]["hostKey"] = values["hosts"][0]["sshHostKey"]
    values["tuning"] = {}
    plan = shared_preview(values)
    assert not [w for w in plan.warnings
                if "acceptAnyHostKey" in w or "disableCpuMitigations" in w]


def test_the_lab_keeps_cpu_mitigations_and_the_iommu_on():
    [prepare] = [r for r in example_plan("lab").of_type("command:remote:Command")
                 if r.name == "moscow-prepare-host"]
    stdin = unwrap_secrets(prepare.inputs["stdin"])
    assert "DISABLE_CPU_MITIGATIONS=false" in stdin.replace("'", "")
    assert "DISABLE_IOMMU=false" in stdin.replace("'", "")
    assert not [w for w in example_plan("lab").warnings if "disableCpuMitigations" in w]
