"""Three controllers of the cloud layout booted through Debian's real cloud-init, in the
order the program launches them (tests/stacks/test_ha_cloud.py), each against moto's SSM
and S3 on the sandbox's loopback with its own role's credentials from IMDSv2
(tests/boot/aws_emulation.py): the first initialises with the CA key it reads; the others
read their join credentials (k0s: the token the first issued, as `pulumi up` stores it for
each; RKE2: the cluster's server token) from SSM and join through the load balancer, never
reading the CA key. The host is the bats suite's stubbed one, whose python3 hands SSM's
client to the real interpreter here (STUB_REAL_SSM)."""

import json
from pathlib import Path

import pytest

from components.aws import ssm_paths
from components.common.step_text import step_inputs
from tests.boot.aws_emulation import AwsEmulation
from tests.boot.boot_cases import (HA_VARIANTS, SSM_VALUES, SSM_TARGETS, Boot, done,
                                   expected_steps, machines, node_of_its_own, ssm_reads)
from tests.boot.cloud_init import INSTANCE_ID, STAGES, boot_again, run_user_data
from tests.boot.stub_host import StubHost, stub_host
from tests.builders import PROJECT_DIR

CONTROLLERS = ("control-plane", "control-plane-2", "control-plane-3")
ENDPOINT = "10.20.0.11"
# What `pulumi up` stores for each joining k0s controller: the token its
# create-controller-token step printed on the first (made up here, in k0s's form).
JOIN_TOKENS = {name: f"H4sIAAAAAAAA{name.replace('-', '')}JoinToken" for name in CONTROLLERS[1:]}


def controllers(stack: str) -> list[Boot]:
    """The stack's controllers, the first first."""
    found = {case.host: case for case in machines(stack)
             if case.resource.type == "aws:ec2/instance:Instance"}
    return [found[name] for name in CONTROLLERS]


def parameters(case: Boot) -> dict[str, tuple[str, str]]:
    """The SecureStrings the program stores for the machine's boot, as `up` leaves them."""
    stored = {}
    for name, _, parameter in ssm_reads(case):
        value = (JOIN_TOKENS[case.host] if name == "K0S_CONTROLLER_TOKEN_SSM_PARAMETER"
                 else SSM_VALUES[name])
        stored[parameter] = ("SecureString", value)
    return stored


def moto_policy(case: Boot) -> str:
    """The machine's role policy as the program renders it, its SSM statements' resources
    widened to "*": moto authorizes SSM requests against "*" whatever the parameter
    (aws_emulation.py), so it checks their actions only; which parameters each role may
    read is test_ha_cloud.py's test_each_role_reads_only_what_its_boot_needs."""
    statements = [{**s, "Resource": "*"} if s["Action"][0].startswith("ssm:") else s
                  for s in case.statements()]
    return json.dumps({"Version": "2012-10-17", "Statement": statements})


def boot(case: Boot, tmp_path: Path, **stub_controls: str) -> tuple[StubHost, list]:
    """Boots the controller (again after the reboot its steps ask for), SSM and S3 served
    by moto; returns the host and each boot's run."""
    host = stub_host(tmp_path / case.host, {})
    install = step_inputs(case.scripts[case.steps.index("install-controller")])
    env = {**host.env, "STUB_GPU_COUNT": "0", "S3_GET_RETRY_SECONDS": "0", "STUB_REAL_SSM": "1",
           # The cluster's CA, which a joining controller gets from the one it joins.
           "STUB_CLUSTER_CA": install.get("K0S_CA_CERT") or install["RKE2_CA_CERT"],
           **node_of_its_own(case), **stub_controls}
    if case.stack.endswith("rke2"):
        kubectl = host.root / "var/lib/rancher/rke2/bin/kubectl"
        kubectl.parent.mkdir(parents=True, exist_ok=True)
        kubectl.symlink_to(PROJECT_DIR / "tests/scripts/stubs/stub")
        # A joining server writes the CA of the cluster it joins as it starts.
        env["STUB_ON_START"] = (
            '[[ "$1" == rke2-server ]] || exit 0\n'
            'tls="$GPU_CLUSTER_ROOT/var/lib/rancher/rke2/server/tls"; mkdir -p "$tls"\n'
            '[[ -f "$tls/server-ca.crt" ]] || for name in server-ca client-ca; do\n'
            '  printf "%s\\n" "$STUB_CLUSTER_CA" >"$tls/$name.crt"; echo key >"$tls/$name.key"\n'
            'done')
    aws = AwsEmulation(policy=moto_policy(case), region=case.inputs["AWS_REGION"],
                       bucket=case.inputs["BOOT_BUCKET"], objects=case.objects(),
                       parameters=parameters(case), role=f"{case.host}-role",
                       dump_paths=(ssm_paths.cluster_prefix("test"),))
    sandbox = tmp_path / f"{case.host}-sandbox"
    runs = [run_user_data(case.user_data, sandbox, env, aws=aws)]
    if "rebooting in" in runs[0].output:
        host.reboot()
        runs.append(boot_again(sandbox, env, aws=aws))
    return host, runs


@pytest.mark.parametrize("stack", list(HA_VARIANTS))
def test_three_controllers_boot_the_first_initialising_the_others_joining(stack, tmp_path):
    rke2 = stack.endswith("rke2")
    ca_key = ssm_paths.control_plane_secret("test", "ca-key")
    for index, case in enumerate(controllers(stack)):
        host, runs = boot(case, tmp_path)
        output = "".join(run.output for run in runs)
        for run in runs:
            assert run.exit_codes == dict.fromkeys(STAGES, 0), run.output
        assert case.steps == expected_steps(case)
        for step in case.steps:
            assert f"gpu-cluster: {case.host}: {step}: {done(case, step)}" in output, step
        # Every SSM request went to moto, signed with the machine's role, and succeeded;
        # its boot status is there.
        ssm = [r for run in runs for r in run.aws.requests if r["target"].startswith("AmazonSSM.")]
        assert ssm and all(r["signed"] and r["status"] == 200 for r in ssm), ssm
        read = {r["name"] for r in ssm if r["target"] == "AmazonSSM.GetParameter"}
        status = runs[-1].aws.value(f"{case.inputs['BOOT_STATUS_PARAMETER']}/{INSTANCE_ID}")
        assert status == "ready"
        calls = host.calls()
        if index == 0:
            # The first: the CA key from SSM, a cluster of its own.
            assert ca_key in read
            target = SSM_TARGETS[("RKE2" if rke2 else "K0S") + "_CA_KEY_SSM_PARAMETER"]
            assert (host.root / target.lstrip("/")).read_text().strip() == \
                SSM_VALUES["K0S_CA_KEY_SSM_PARAMETER"].strip()
            if rke2:
                assert "server:" not in (host.root / "etc/rancher/rke2/config.yaml").read_text()
            else:
                assert not [c for c in calls if c.startswith("k0s install controller")
                            and "--token-file" in c]
            continue
        # The others: never the CA key; their join credentials from SSM.
        assert ca_key not in read
        if rke2:
            assert ssm_paths.control_plane_secret("test", "server-token") in read
            assert (host.root / "etc/rancher/rke2/server-token").read_text().strip() == \
                SSM_VALUES["RKE2_TOKEN_SSM_PARAMETER"]
            assert f"server: https://{ENDPOINT}:9345\n" in \
                (host.root / "etc/rancher/rke2/config.yaml").read_text()
            assert f"install-controller: joined https://{ENDPOINT}:9345, whose CA is the " \
                "cluster's" in output
        else:
            token = ssm_paths.controller_secret("test", case.host, ssm_paths.CONTROLLER_JOIN_TOKEN)
            assert token in read
            assert (Path(host.env["STUB_STATE"]) / "k0s-joins").read_text() == \
                f"joined with {JOIN_TOKENS[case.host]}\n"
            assert "install-controller: joined the cluster; its CA is K0S_CA_CERT" in output
            assert JOIN_TOKENS[case.host] not in output


def test_a_new_instance_under_the_first_name_refuses_to_start_a_second_cluster(tmp_path):
    """The first controller's instance lost and launched again while the others run: its
    boot finds their API answering at the load balancer and stops before its install."""
    case = controllers("cloud-ha-k0s")[0]

    host, runs = boot(case, tmp_path, STUB_API_ANSWERS="401")

    output = "".join(run.output for run in runs)
    assert f"gpu-cluster: {case.host}: refuse-second-cluster: a control plane already " \
        f"answers at {ENDPOINT}:6443 (the load balancer)" in output
    assert runs[-1].exit_codes["modules-final"] == 1
    assert "install-controller: boot step started" not in output
    assert not [c for c in host.calls() if c.startswith("k0s install")]
    assert runs[-1].aws.value(f"{case.inputs['BOOT_STATUS_PARAMETER']}/{INSTANCE_ID}") == \
        "refuse-second-cluster: failed with exit code 1"
