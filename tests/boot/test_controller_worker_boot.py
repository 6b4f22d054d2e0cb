"""A k0s EC2 controller that runs its own worker, with k0s's control-plane taint, the AWS
cloud provider and a label only an admin can set (the node the AWS cloud controller
manager and the cluster autoscaler run on), booted through Debian's real cloud-init
(tests/boot/cloud_init.py) from the dev stack's own plan and user data, on the bats suite's
stubbed host, S3, SSM and IMDSv2 emulated. The providerID comes from the emulated IMDS
through the real ssm-parameter.py (STUB_REAL_IMDS); the host name cloud-init sets from the
#cloud-config part, and the sandbox sets again from /etc/hostname at the reboot, is the one
`hostname` reads (STUB_REAL_HOSTNAME), which install-controller holds NODE_NAME to."""

import re

from components.common.step_text import step_inputs
from components.distributions.k0s import CONTROLLER_LABEL
from tests.boot.aws_emulation import AwsEmulation
from tests.boot.boot_cases import (INSTANCE, SSM_VALUES, Boot, cloud_config, done, machines,
                                   report, ssm_reads)
from tests.boot.cloud_init import INSTANCE_ID, STAGES, boot_again, run_user_data
from tests.boot.stub_host import stub_host

LABEL = f"{CONTROLLER_LABEL}=true"
STEP = "install-controller"


def controller() -> Boot:
    [case] = [case for case in machines("dev") if case.resource.type == INSTANCE]
    return case


def boot_with(case: Boot, user_data: str, plan: str, tmp_path, **stub_controls: str):
    """Boots the machine on `user_data` with its bucket holding `plan` (boot_cases.run_boot,
    but with IMDS emulated at the boot after the reboot too, where install-controller
    runs); returns the host and each boot's run."""
    ssm = {(region, parameter): SSM_VALUES[name] for name, region, parameter in ssm_reads(case)}
    host = stub_host(tmp_path / "host", ssm)
    env = {**host.env, "STUB_GPU_COUNT": "0", "S3_GET_RETRY_SECONDS": "0", **stub_controls}
    aws = AwsEmulation(policy=case.policy(), region=case.inputs["AWS_REGION"],
                       bucket=case.inputs["BOOT_BUCKET"],
                       objects={**case.objects(), case.inputs["BOOT_PLAN_KEY"]: plan.encode()})
    runs = [run_user_data(user_data, tmp_path / "sandbox", env, aws=aws)]
    assert "rebooting in" in runs[0].output, report(runs[0], case.steps)
    host.reboot()
    runs.append(boot_again(tmp_path / "sandbox", env, aws=aws))
    return host, runs


def test_a_controller_with_its_worker_boots_tainted_with_its_provider_id_and_label(tmp_path):
    case = controller()
    node = cloud_config(case.user_data)["hostname"]
    assert node == case.host
    [stdin] = [text for step, text in zip(case.steps, case.scripts) if step == STEP]
    inputs = step_inputs(stdin)
    assert {key: inputs[key] for key in ("K0S_ENABLE_WORKER", "K0S_CONTROL_PLANE_TAINT",
                                         "K0S_CLOUD_PROVIDER", "CONTROLLER_NODE_LABEL",
                                         "NODE_NAME")} == {
        "K0S_ENABLE_WORKER": "true", "K0S_CONTROL_PLANE_TAINT": "true",
        "K0S_CLOUD_PROVIDER": "aws", "CONTROLLER_NODE_LABEL": LABEL, "NODE_NAME": node}

    host, runs = boot_with(case, case.user_data, case.plan_text, tmp_path, STUB_NODES=node,
                           STUB_NODE_REGISTERS_AFTER="2", STUB_REAL_IMDS="1",
                           STUB_REAL_HOSTNAME="1")

    output = "".join(boot.output for boot in runs)
    for boot in runs:
        assert boot.exit_codes == dict.fromkeys(STAGES, 0), report(boot, case.steps)
    assert f"gpu-cluster: {case.host}: {STEP}: {done(case, STEP)}" in output
    run = runs[-1]
    # The name cloud-init set at the first boot, set again from /etc/hostname at the next.
    assert [(boot.hostname, boot.etc_hostname) for boot in runs] == [(node, node)] * 2
    # The zone IMDS gives is the region's first (tests/boot/aws_in_sandbox.py).
    provider_id = f"aws:///{case.inputs['AWS_REGION']}a/{INSTANCE_ID}"
    calls = host.calls()
    [install] = [call for call in calls if call.startswith("k0s install controller")]
    assert re.fullmatch(
        r"k0s install controller -c /etc/k0s/k0s\.yaml --enable-worker --enable-cloud-provider "
        rf"--kubelet-extra-args=(--node-ip=\S+ )?(\S+ )*--provider-id={re.escape(provider_id)}"
        r"( --\S+)*", install), install
    assert "--no-taints" not in install
    # Read from the emulated IMDS with an IMDSv2 token.
    assert {r["path"] for r in run.aws.imds_requests if r["token"] == "valid"} >= {
        "/latest/meta-data/instance-id", "/latest/meta-data/placement/availability-zone"}
    # The node labelled once it registered (the second read), after the API was ready.
    assert calls.count(f"k0s kubectl get node {node}") == 2, calls
    label = f"k0s kubectl label node {node} --overwrite {LABEL}"
    assert calls.count(label) == 1, calls
    assert calls.index("k0s kubectl get --raw=/readyz") < calls.index(label)
    assert f"{STEP}: changed: node {node} now has the label {LABEL}" in output
