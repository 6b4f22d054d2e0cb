"""Three EC2 controllers on the cloud layout through the offline preview, for each
distribution: every one installs itself at boot, the first initialising, the others
joining it through the network load balancer one at a time, each launched once the one
before it is an etcd member, reading its join credentials from SSM with its own role;
then every install step over SSH (the upgrades' way) is the boot's, one after the other.
(tests/boot/test_ha_cloud_boot.py boots them through cloud-init.)"""

import json

import pytest
import yaml

from components.aws import ssm_paths
from components.common.step_text import step_inputs
from contract import ports
from policy import offline
from preview.engine import unwrap_secrets as unwrap
from tests.builders import cloud_config, hybrid_config, shared_preview
from tests.stacks.ec2_controllers import (ADDRESSES, BALANCED, CONTROLLERS, DISTRIBUTIONS,
                                          ENDPOINT, apiserver_targets, attached, outputs,
                                          runs_on, three_controllers)

HOSTS = ("test-control-plane-host", "test-control-plane-host-2", "test-control-plane-host-3")


@pytest.fixture(scope="module", params=DISTRIBUTIONS)
def ha(request):
    return request.param, shared_preview(three_controllers(cloud_config(), request.param))


def boot(plan, host: str) -> dict[str, dict[str, str]]:
    """Each boot step of the instance of `host` (a ControlPlaneHost), by name: its inputs."""
    user_data = plan.named(f"{host}-instance").inputs["userDataBase64"]
    return {name: step_inputs(stdin) for name, stdin in plan.boot_steps(user_data)}


def over_ssh(plan, name: str) -> dict[str, str]:
    return step_inputs(unwrap(plan.named(name).inputs["stdin"]))


def reads(plan, host: str) -> set[str]:
    """The SSM parameters the role of `host` may read."""
    [policy] = [r for r in plan.of_type("aws:iam/rolePolicy:RolePolicy")
                if r.name == f"{host}-role-read-parameter"]
    [statement] = [s for s in json.loads(unwrap(policy.inputs["policy"]))["Statement"]
                   if s["Sid"] == "ReadItsParameters"]
    return {arn.split(":parameter", 1)[1] for arn in statement["Resource"]}


def test_every_controller_installs_itself_the_first_initialising(ha):
    distribution, plan = ha
    prefix = distribution.upper()
    for index, host in enumerate(HOSTS):
        steps = boot(plan, host)
        assert list(steps)[0] == "install-ssh-host-key"
        assert {"prepare-host", "install-controller", "install-backup"} <= set(steps)
        install = steps["install-controller"]
        # The first asks, before it initialises, whether a control plane answers at the
        # load balancer already (a new instance under its name would start a second one).
        names = list(steps)
        assert ("refuse-second-cluster" in names) is (index == 0)
        if index == 0:
            assert names.index("refuse-second-cluster") == names.index("install-controller") - 1
            assert steps["refuse-second-cluster"]["API_ADDRESS"] == ENDPOINT
        # The CA key goes to the first alone; the others take the CA from the cluster.
        assert bool(install.get(f"{prefix}_CA_KEY_SSM_PARAMETER")) is (index == 0)
        if distribution == "rke2":
            config = yaml.safe_load(install["RKE2_CONFIG"])
            assert ("server" in config) is (index > 0)
            if index:
                assert config["server"] == f"https://{ENDPOINT}:{ports.RKE2_SUPERVISOR}"
            # Every server reads the cluster's tokens, the first's parameters.
            assert install["RKE2_TOKEN_SSM_PARAMETER"] == \
                ssm_paths.control_plane_secret("test", "server-token")
        else:
            token = install.get("K0S_CONTROLLER_TOKEN_SSM_PARAMETER")
            assert token == (ssm_paths.controller_secret(
                "test", CONTROLLERS[index], ssm_paths.CONTROLLER_JOIN_TOKEN) if index else None)
            assert "K0S_CONTROLLER_TOKEN" not in install or install["K0S_CONTROLLER_TOKEN"] == ""
        # Every controller's snapshots timer knows the others: the first that answers takes it.
        backup = steps["install-backup"]
        assert backup["BACKUP_NODE"] == CONTROLLERS[index]
        assert backup["BACKUP_CONTROLLERS"] == ",".join(
            f"{c}={a}" for c, a in zip(CONTROLLERS, ADDRESSES))


def test_each_role_reads_only_what_its_boot_needs(ha):
    distribution, plan = ha
    ca_key = ssm_paths.control_plane_secret("test", "ca-key")
    first = reads(plan, HOSTS[0])
    assert ca_key in first
    for index, (host, controller) in enumerate(zip(HOSTS[1:], CONTROLLERS[1:]), start=1):
        found = reads(plan, host)
        assert ca_key not in found
        own = ssm_paths.controller_secret("test", controller, ssm_paths.CONTROLLER_JOIN_TOKEN)
        others = {ssm_paths.controller_secret("test", c, ssm_paths.CONTROLLER_JOIN_TOKEN)
                  for c in CONTROLLERS[1:] if c != controller}
        assert (own in found) is (distribution == "k0s")
        assert not found & others
        assert own not in first
        if distribution == "rke2":
            assert ssm_paths.control_plane_secret("test", "server-token") in found


def test_the_controllers_join_one_at_a_time(ha):
    distribution, plan = ha
    first = runs_on(plan, "control-plane-install-bundle")
    assert "control-plane-wait-for-api" in plan.all_dependencies(
        plan.named(f"{HOSTS[1]}-instance"))
    for index in (1, 2):
        controller, host = CONTROLLERS[index], HOSTS[index]
        launched = plan.all_dependencies(plan.named(f"{host}-instance"))
        member = plan.named(f"{controller}-etcd-member")
        # The first waits for its member, through its whole boot, and takes it out of
        # etcd before the instance goes.
        assert runs_on(plan, member.name) == first
        assert over_ssh(plan, member.name)["MEMBER_WAIT_SECONDS"] == "1800"
        assert f"{host}-instance" in plan.all_dependencies(member)
        if index == 2:
            assert f"{CONTROLLERS[1]}-etcd-member" in launched
        if distribution == "k0s":
            token = f"{controller}-create-controller-token"
            assert runs_on(plan, token) == first
            assert over_ssh(plan, token)["TOKEN_EXPIRY"] == "1h"
            assert {token, f"{host}-{ssm_paths.CONTROLLER_JOIN_TOKEN}"} <= launched
            stored = plan.named(f"{host}-{ssm_paths.CONTROLLER_JOIN_TOKEN}").inputs
            assert stored["type"] == "SecureString"
            assert stored["name"] == ssm_paths.controller_secret(
                "test", controller, ssm_paths.CONTROLLER_JOIN_TOKEN)
        else:
            assert not [r for r in plan.of_type("command:remote:Command")
                        if r.name.endswith("-create-controller-token")]


def test_the_install_over_ssh_is_the_boots_one_after_the_other(ha):
    """Its first run changes nothing; a raised kubernetes.version upgrades one controller
    at a time, each after the one before and its own etcd-quorum check."""
    distribution, plan = ha
    config = "K0S_CONFIG" if distribution == "k0s" else "RKE2_CONFIG"
    last_member = plan.named(f"{CONTROLLERS[2]}-etcd-member")
    for index, (controller, host) in enumerate(zip(CONTROLLERS, HOSTS)):
        install = plan.named(f"{controller}-install-controller")
        assert runs_on(plan, install.name) == runs_on(plan, f"{controller}-install-bundle")
        assert over_ssh(plan, install.name)[config] == \
            boot(plan, host)["install-controller"][config]
        waits = plan.all_dependencies(install)
        assert {last_member.name, f"{controller}-etcd-quorum"} <= waits
        assert over_ssh(plan, f"{controller}-etcd-quorum")["EXPECTED_MEMBERS"] == "3"
        if index:
            assert f"{CONTROLLERS[index - 1]}-install-controller" in waits
        assert plan.named(f"{controller}-authorized-keys")
    # The pools join once the last controller is installed (a kubelet is never newer than
    # the oldest API server).
    [group] = plan.of_type("aws:autoscaling/group:Group")
    assert f"{CONTROLLERS[2]}-install-controller" in plan.all_dependencies(group)


def test_every_certificate_names_both_balancers_and_kubeconfigs_the_public_one(ha):
    distribution, plan = ha
    internal = outputs(plan, "test-api-nlb")["dnsName"]
    public = outputs(plan, "test-public-api-nlb")["dnsName"]
    for host, address in zip(HOSTS, ADDRESSES):
        env = boot(plan, host)["install-controller"]
        if distribution == "k0s":
            spec = yaml.safe_load(env["K0S_CONFIG"])["spec"]
            names = spec["api"]["sans"]
            assert spec["api"]["externalAddress"] == ENDPOINT
        else:
            names = yaml.safe_load(env["RKE2_CONFIG"])["tls-san"]
        assert {ENDPOINT, internal, public, address} <= set(names)
    # `pulumi up`, the admin and every user reach the API through the public one: no
    # controller of theirs is special.
    kubeconfigs = [plan.outputs["kubeconfig"][0],
                   *plan.outputs["userKubeconfigs"][0].values()]
    for kubeconfig in kubeconfigs:
        assert yaml.safe_load(kubeconfig)["clusters"][0]["cluster"]["server"] == \
            f"https://{public}:6443"
    assert unwrap(plan.named("control-plane-wait-for-api").inputs["stdin"]).count(
        f"https://{public}:6443") == 1


def test_the_public_balancer_forwards_the_api_alone_from_the_admins(ha):
    _, plan = ha
    nlb = plan.named("test-public-api-nlb").inputs
    assert (nlb["loadBalancerType"], nlb["internal"]) == ("network", False)
    assert {r.inputs["port"] for r in plan.of_type("aws:lb/listener:Listener")
            if r.name.startswith("test-public-api-")} == {ports.KUBERNETES_API}
    group = outputs(plan, "test-public-api-sg")["id"]
    admitted = [r.inputs for r in plan.of_type(
        "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
        if r.inputs["securityGroupId"] == group]
    assert [(r["fromPort"], r["cidrIpv4"]) for r in admitted] == [
        (ports.KUBERNETES_API, "198.51.100.0/24")]
    # Each controller admits it on the API port alone, by group.
    for host in HOSTS:
        rule = plan.named(f"{host}-kubernetes-api-public").inputs
        assert (rule["fromPort"], rule["referencedSecurityGroupId"]) == \
            (ports.KUBERNETES_API, group)


def test_both_balancers_forward_to_every_controller(ha):
    distribution, plan = ha
    listeners = {r.inputs["port"] for r in plan.of_type("aws:lb/listener:Listener")
                 if r.name.startswith("test-api-")}
    assert listeners == BALANCED[distribution]
    instances = {outputs(plan, f"{host}-instance")["id"] for host in HOSTS}
    assert set(map(frozenset, attached(plan).values())) == {frozenset(instances)}


def test_the_policy_pack_passes_the_stack(ha):
    _, plan = ha
    assert offline.evaluate(offline.resources_of_plan(plan)) == []
    assert offline.evaluate_stack(offline.stack_resources_of_plan(plan)) == []


def test_every_controller_is_a_node_output_and_a_scrape_target(ha):
    _, plan = ha
    assert [(n["name"], n["address"]) for n in plan.outputs["nodes"][0]] == \
        list(zip(CONTROLLERS, ADDRESSES))
    assert apiserver_targets(plan) == [sorted(f"{address}:6443" for address in ADDRESSES)]


@pytest.mark.parametrize("layout", [cloud_config, hybrid_config], ids=["cloud", "hybrid"])
def test_a_new_instance_under_a_joined_controllers_name_retires_the_old_member_first(layout):
    """aws.controlPlane.generations: the instance is replaced (the old one first: its fixed
    address), the old member and node leave on the first before the new one joins with a
    new token, and the URNs stay."""
    before = shared_preview(three_controllers(layout(), "k0s"))
    values = three_controllers(layout(), "k0s")
    values["aws"]["controlPlane"] = {"generations": {"control-plane-2": 1}}
    plan = shared_preview(values)
    assert {r.urn for r in plan.resources} - {r.urn for r in before.resources} == {
        plan.named("control-plane-2-retire-member").urn}
    triggers = {host: plan.named(f"{host}-instance").replacement_trigger for host in HOSTS}
    assert triggers == {HOSTS[0]: None, HOSTS[1]: 1, HOSTS[2]: None}
    first = runs_on(plan, "control-plane-install-bundle")
    retire = plan.named("control-plane-2-retire-member")
    assert runs_on(plan, retire.name) == first
    assert over_ssh(plan, retire.name)["MEMBER_NODE"] == "control-plane-2"
    token = plan.named("control-plane-2-create-controller-token")
    assert retire.name in plan.all_dependencies(token)
    assert over_ssh(plan, token.name)["MACHINE_GENERATION"] == "1"
    joined = plan.named("control-plane-2-install-controller" if layout is hybrid_config
                        else f"{HOSTS[1]}-instance")
    assert {retire.name, token.name} <= plan.all_dependencies(joined)
