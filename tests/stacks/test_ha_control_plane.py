"""Three controllers on bare metal through the offline preview, for each distribution: the
first initialises and the others join it one at a time (its token for k0s, the server
token at the VIP for RKE2), never with the CA key; every certificate, kubeconfig and join
names the VIP; each controller's install (its upgrade) waits for its etcd-quorum check and
for the controller before it, and the workers for the last; a removed controller's etcd
member leaves first. One controller keeps its steps (the URN and build records)."""

import ipaddress
import re

import pytest
import yaml

from components.common.step_text import step_inputs
from components.distributions.rke2 import SUPERVISOR_PORT
from preview.engine import unwrap_secrets as unwrap
from tests.builders import TEST_AGE_RECIPIENT, bare_metal_config, preview, shared_preview
from tests.components.test_ha_configs import VIP, cluster
from tests.stacks.steps import waits_for
from tests.stacks.test_upgrade import NEXT_K0S, NEXT_RELEASE_SHA256

CONTROLLERS = ("controller", "gpu000", "gpu001")
WORKERS = ("gpu002", "gpu003", "gpu004")
API = f"https://{VIP}:6443"
NEXT = {"k0s": NEXT_K0S, "rke2": "v1.37.0+rke2r1"}
DISTRIBUTIONS = ("k0s", "rke2")


@pytest.fixture(scope="module", params=DISTRIBUTIONS)
def ha(request):
    return request.param, shared_preview(cluster(3, request.param))


def stdin(plan, name: str) -> str:
    return unwrap(plan.named(name).inputs["stdin"])


def inputs(plan, name: str) -> dict[str, str]:
    return step_inputs(stdin(plan, name))


def steps_before(plan, name: str) -> set[str]:
    """The steps (remote commands) `name` waits for, but its machine's bundle step."""
    return {dependency for dependency in waits_for(plan, name)
            if plan.named(dependency).type == "command:remote:Command"}


def runs_on(plan, name: str) -> str:
    """The address of the machine a step runs on."""
    return unwrap(plan.named(name).inputs["connection"])["host"]


def last_step(distribution: str, controller: str) -> str:
    """The end of a controller's install: the first's kubelet settings (RKE2) or install;
    a joined one's etcd member."""
    if controller != CONTROLLERS[0]:
        return f"{controller}-etcd-member"
    return f"{controller}-{'apply-worker-profile' if distribution == 'rke2' else 'install-controller'}"


def test_the_controllers_join_in_order_after_their_checks(ha):
    distribution, plan = ha
    for index, controller in enumerate(CONTROLLERS):
        before = {f"{controller}-verify-boot", f"{controller}-check-version",
                  f"{controller}-etcd-quorum"}
        if distribution == "rke2":
            before.add(f"{controller}-control-plane-vip")
        if index:
            before.add(last_step(distribution, CONTROLLERS[index - 1]))
            if distribution == "k0s":
                before.add(f"{controller}-create-controller-token")
        assert steps_before(plan, f"{controller}-install-controller") == before
        # The quorum check runs once the controller before it is back (at an upgrade,
        # one etcd member down at a time).
        assert steps_before(plan, f"{controller}-etcd-quorum") == {f"{controller}-verify-boot"} | (
            {last_step(distribution, CONTROLLERS[index - 1])} if index else set())
        assert inputs(plan, f"{controller}-etcd-quorum")["EXPECTED_MEMBERS"] == "3"


def test_joining_controllers_never_get_the_ca_key(ha):
    distribution, plan = ha
    key = f"{distribution.upper()}_CA_KEY"
    assert "PRIVATE KEY" in inputs(plan, "controller-install-controller")[key]
    for joining in CONTROLLERS[1:]:
        join = inputs(plan, f"{joining}-install-controller")
        assert key not in join and f"{key}_SSM_PARAMETER" not in join
        assert "PRIVATE KEY" not in plan.redact(plan.named(f"{joining}-install-controller")
                                                .inputs["stdin"])
        if distribution == "k0s":
            token = plan.named(f"{joining}-create-controller-token")
            # Made on the first controller, read as a secret, handed to this join only.
            assert runs_on(plan, token.name) == runs_on(plan, "controller-install-controller")
            # The first controller's stdout at `up`: unknown here, so the step's whole stdin
            # is hidden in the preview's report (a secret with an unknown part).
            assert "K0S_CONTROLLER_TOKEN" in join and "K0S_JOIN_ISSUER_URN" in join
            assert inputs(plan, f"{joining}-create-controller-token")["TOKEN_EXPIRY"] == "1h"
        else:
            assert join["RKE2_TOKEN"] == inputs(plan, "controller-install-controller")["RKE2_TOKEN"]
            assert yaml.safe_load(join["RKE2_CONFIG"])["server"] == \
                f"https://{VIP}:{SUPERVISOR_PORT}"


def test_every_certificate_kubeconfig_and_join_names_the_vip(ha):
    distribution, plan = ha
    for controller in CONTROLLERS:
        env = inputs(plan, f"{controller}-install-controller")
        if distribution == "k0s":
            sans = yaml.safe_load(env["K0S_CONFIG"])["spec"]["api"]["sans"]
        else:
            sans = yaml.safe_load(env["RKE2_CONFIG"])["tls-san"]
        assert VIP in sans
    assert plan.outputs["apiEndpoint"][0] == API
    [entry] = yaml.safe_load(plan.outputs["kubeconfig"][0])["clusters"]
    assert entry["cluster"]["server"] == API
    for kubeconfig in (plan.outputs.get("userKubeconfigs") or ({}, True))[0].values():
        assert yaml.safe_load(kubeconfig)["clusters"][0]["cluster"]["server"] == API
    for worker in WORKERS:
        join = inputs(plan, f"{worker}-join-worker")
        if distribution == "rke2":
            assert yaml.safe_load(join["RKE2_CONFIG"])["server"] == \
                f"https://{VIP}:{SUPERVISOR_PORT}"


def test_workers_wait_for_the_last_controller(ha):
    distribution, plan = ha
    for worker in WORKERS:
        assert steps_before(plan, f"{worker}-drain-node") == {
            last_step(distribution, CONTROLLERS[-1])}


def test_the_vip_is_keepaliveds_on_rke2_and_k0s_own_on_k0s(ha):
    distribution, plan = ha
    steps = [r.name for r in plan.of_type("command:remote:Command")]
    vips = [name for name in steps if name.endswith("-control-plane-vip")]
    if distribution == "k0s":
        assert vips == []
        for controller in CONTROLLERS:
            spec = yaml.safe_load(inputs(plan, f"{controller}-install-controller")["K0S_CONFIG"])
            assert spec["spec"]["network"]["controlPlaneLoadBalancing"]["enabled"] is True
        return
    assert sorted(vips) == sorted(f"{c}-control-plane-vip" for c in CONTROLLERS)
    addresses = {c: inputs(plan, f"{c}-install-controller")["RKE2_CONFIG"] for c in CONTROLLERS}
    addresses = {c: yaml.safe_load(text)["node-ip"] for c, text in addresses.items()}
    for controller in CONTROLLERS:
        text = stdin(plan, f"{controller}-control-plane-vip")
        conf = inputs(plan, f"{controller}-control-plane-vip")["KEEPALIVED_CONF"]
        assert f"\t\t{VIP}/24" in conf
        assert f"unicast_src_ip {addresses[controller]}" in conf
        peers = re.search(r"unicast_peer \{\n((?:\t\t.*\n)*)\t\}", conf)[1].split()
        assert sorted(peers) == sorted(a for c, a in addresses.items() if c != controller)
        assert "delete vip/keepalived-remove.sh" in text


def test_controllers_admit_vrrp_from_each_other_only(ha):
    distribution, plan = ha
    addresses = {h["name"]: h["address"] for h in cluster(3, distribution)["hosts"]}
    for host, address in addresses.items():
        ruleset = inputs(plan, f"{host}-host-firewall")["HOST_FIREWALL_RULESET"]
        if host in CONTROLLERS:
            peers = {a for h, a in addresses.items() if h in CONTROLLERS and h != host}
            [elements] = re.findall(r"set vrrp_peers \{[^}]*elements = \{ ([^}]*) \}", ruleset)
            admitted = {str(a) for e in elements.split(", ")
                        for a in ipaddress.ip_network(e)}
            assert admitted == peers and address not in peers
        else:
            assert "vrrp" not in ruleset


def test_a_removed_controllers_member_leaves_etcd_from_the_first(ha):
    distribution, plan = ha
    for joining in CONTROLLERS[1:]:
        member = plan.named(f"{joining}-etcd-member")
        env = inputs(plan, f"{joining}-etcd-member")
        assert (env["NODE_NAME"], env["MEMBER_NODE"]) == ("controller", joining)
        ipaddress.IPv4Address(env["MEMBER_ADDRESS"])
        assert f"delete {distribution}/leave-etcd.sh" in stdin(plan, member.name)
        assert runs_on(plan, member.name) == runs_on(plan, "controller-install-controller")
        # Deleted before the controller's own reset, which it depends on.
        assert f"{joining}-install-controller" in plan.all_dependencies(member)


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_an_upgrade_goes_through_every_controller_then_the_workers(distribution):
    before = shared_preview(cluster(3, distribution))
    values = cluster(3, distribution)
    values["kubernetes"]["version"] = NEXT[distribution]
    values["versions"] = NEXT_RELEASE_SHA256
    after = preview(values)
    changed = changed_steps_present(before, after)
    for controller in CONTROLLERS:
        assert {f"{controller}-check-version", f"{controller}-etcd-quorum",
                f"{controller}-install-controller"} <= changed
    assert not any(name.endswith(("-etcd-member", "-control-plane-vip", "-controller-token"))
                   for name in changed)
    assert sorted(r.urn for r in before.resources) == sorted(r.urn for r in after.resources)


def test_one_controller_has_no_quorum_vip_or_member_steps():
    plan = shared_preview(bare_metal_config(workers=3))
    names = [r.name for r in plan.of_type("command:remote:Command")]
    assert not [n for n in names if n.endswith(
        ("-etcd-quorum", "-etcd-member", "-control-plane-vip", "-controller-token"))]


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_a_replaced_controller_leaves_etcd_then_joins_again(distribution):
    """hosts[].generation on a joined controller: its old member and node go, from the
    first controller, before the new machine joins; its steps run again."""
    before = shared_preview(cluster(3, distribution))
    values = cluster(3, distribution)
    values["hosts"][1]["generation"] = 1
    after = preview(values)
    retire = after.named("gpu000-retire-member")
    assert f"create {distribution}/leave-etcd.sh" in stdin(after, retire.name)
    assert runs_on(after, retire.name) == runs_on(after, "controller-install-controller")
    assert inputs(after, retire.name)["MEMBER_NODE"] == "gpu000"
    assert "gpu000-retire-member" in steps_before(after, "gpu000-install-controller")
    changed = changed_steps_present(before, after)
    assert {"gpu000-install-controller", "gpu000-etcd-member", "gpu000-etcd-quorum"} <= changed
    assert not any(name.startswith(("controller-", "gpu001-")) and "install" in name
                   for name in changed)


def plain_stdins(plan) -> dict[str, str]:
    """Each step's stdin as given (a k0s joiner's token is unknown in a preview, which hides
    such a stdin whole: steps.step_stdins), without what every preview makes anew."""
    return {r.name: re.sub(r"(TOKEN|CA_CERT|CA_KEY)='[^']*'", "", unwrap(r.inputs["stdin"]))
            for r in plan.of_type("command:remote:Command")}


def changed_steps_present(before, after) -> set[str]:
    """The steps of both plans whose stdin differs (steps only `after` has left out)."""
    old, new = plain_stdins(before), plain_stdins(after)
    return {name for name in old.keys() & new.keys() if old[name] != new[name]}


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_every_controller_installs_the_backup_and_the_first_that_answers_takes_it(distribution):
    values = cluster(3, distribution)
    values["backup"] = {"path": "/mnt/backups", "recipients": [TEST_AGE_RECIPIENT]}
    plan = shared_preview(values)
    listed = ",".join(f"{h['name']}={h['address']}" for h in values["hosts"][:3])
    for controller in CONTROLLERS:
        env = inputs(plan, f"{controller}-install-backup")
        assert (env["BACKUP_CONTROLLERS"], env["BACKUP_NODE"], env["API_PORT"]) == (
            listed, controller, "6443")
        assert runs_on(plan, f"{controller}-install-backup") == runs_on(
            plan, f"{controller}-install-controller")
        assert last_step(distribution, CONTROLLERS[-1]) in steps_before(
            plan, f"{controller}-install-backup")
    one = shared_preview({**bare_metal_config(workers=3), "backup": values["backup"]})
    assert "BACKUP_CONTROLLERS" not in inputs(one, "controller-install-backup")


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_two_controllers_more_join_after_the_three(distribution):
    """3 to 5: the existing controllers keep their resources; the new ones join in order
    after them (their quorum checks find nothing installed there yet, and the others'
    checks count the members listed: tests/scripts/etcd-quorum.bats)."""
    before = shared_preview(cluster(3, distribution))
    after = shared_preview(cluster(5, distribution))
    assert {r.urn for r in before.resources if "install-controller" in r.name} <= {
        r.urn for r in after.resources}
    assert last_step(distribution, "gpu001") in steps_before(after, "gpu002-install-controller")
    assert last_step(distribution, "gpu002") in steps_before(after, "gpu003-install-controller")
    assert inputs(after, "controller-etcd-quorum")["EXPECTED_MEMBERS"] == "5"
