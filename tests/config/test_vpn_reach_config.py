"""vpn.userNetworks: networks a user's VPN reaches beyond the Kubernetes API; names users
of access.users, CIDRs only, and the tunnel has an address for every user."""

from tests.builders import hybrid_config
from tests.config.loading import loads, problem_lines

ACCESS = {"teams": [{"name": "vision"}],
          "users": [{"name": "alice", "namespaces": ["vision"]}]}


def stack(access=ACCESS, **vpn) -> dict:
    values = hybrid_config()
    values["vpn"].update(vpn)
    values["access"] = access
    return values


def test_user_networks_load_and_default_to_none():
    assert loads(stack()).vpn.user_networks == {}
    vpn = loads(stack(userNetworks={"alice": ["192.168.2.0/24"]})).vpn
    assert vpn.user_networks == {"alice": ["192.168.2.0/24"]}


def test_bad_user_networks_are_named_by_key():
    found = problem_lines(stack(userNetworks={"alice": ["192.168.2.0/24; reboot"]}))
    assert found == ["gpu-cluster:vpn.userNetworks.alice[0]: '192.168.2.0/24; reboot' is not "
                     "an IPv4 network in CIDR form ('24; reboot' is not a valid netmask)"]
    found = problem_lines(stack(userNetworks={"mallory": ["10.0.0.0/8"], "bob": []}))
    assert found == ["gpu-cluster:vpn.userNetworks.bob: 'bob' is not one of access.users "
                     "(alice)",
                     "gpu-cluster:vpn.userNetworks.mallory: 'mallory' is not one of "
                     "access.users (alice)"], found


def test_the_tunnel_must_hold_every_user():
    users = [{"name": f"user{i}", "namespaces": ["vision"]} for i in range(16)]
    found = problem_lines(stack(access={**ACCESS, "users": users}, tunnelCidr="10.8.0.0/27"))
    assert found == ["gpu-cluster:vpn.tunnelCidr: 10.8.0.0/27 has VPN addresses for 15 users, "
                     "and access.users has 16; use a larger network"]


def test_user_networks_need_our_server():
    values = stack(mode="client-to-existing", existingServerAddress="192.168.2.1",
                   onpremGateway=None, clientSourceCidrs=[],
                   userNetworks={"alice": ["10.0.0.0/8"]})
    values["vpn"] = {k: v for k, v in values["vpn"].items() if v not in (None, [])}
    found = problem_lines(values)
    assert "gpu-cluster:vpn.userNetworks: is only used with vpn.mode server-on-ec2" in found
