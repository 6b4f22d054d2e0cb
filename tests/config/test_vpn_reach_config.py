"""vpn.userNetworks: networks a user's VPN reaches beyond the Kubernetes API; names users
of access.users, CIDRs only, and the tunnel has an address for every user."""

import pytest

from config import ConfigError, load
from tests.builders import as_cli_config, hybrid_config

ACCESS = {"teams": [{"name": "vision"}],
          "users": [{"name": "alice", "namespaces": ["vision"]}]}


def stack(access=ACCESS, **vpn) -> dict:
    values = hybrid_config()
    values["vpn"].update(vpn)
    values["access"] = access
    return values


def problems(values: dict) -> list[str]:
    cli = as_cli_config(values)
    with pytest.raises(ConfigError) as caught:
        load(cli.config, cli.secret_keys, stack="test")
    return [str(problem) for problem in caught.value.problems]


def test_user_networks_load_and_default_to_none():
    cli = as_cli_config(stack())
    assert load(cli.config, cli.secret_keys, stack="test").vpn.user_networks == {}
    cli = as_cli_config(stack(userNetworks={"alice": ["192.168.2.0/24"]}))
    vpn = load(cli.config, cli.secret_keys, stack="test").vpn
    assert vpn.user_networks == {"alice": ["192.168.2.0/24"]}


def test_bad_user_networks_are_named_by_key():
    found = problems(stack(userNetworks={"alice": ["192.168.2.0/24; reboot"]}))
    assert found == ["gpu-cluster:vpn.userNetworks.alice[0]: '192.168.2.0/24; reboot' is not "
                     "an IPv4 network in CIDR form ('24; reboot' is not a valid netmask)"]
    found = problems(stack(userNetworks={"mallory": ["10.0.0.0/8"], "bob": []}))
    assert found == ["gpu-cluster:vpn.userNetworks.bob: 'bob' is not one of access.users "
                     "(alice)",
                     "gpu-cluster:vpn.userNetworks.mallory: 'mallory' is not one of "
                     "access.users (alice)"], found


def test_the_tunnel_must_hold_every_user():
    users = [{"name": f"user{i}", "namespaces": ["vision"]} for i in range(16)]
    found = problems(stack(access={**ACCESS, "users": users}, tunnelCidr="10.8.0.0/27"))
    assert found == ["gpu-cluster:vpn.tunnelCidr: 10.8.0.0/27 has VPN addresses for 15 users, "
                     "and access.users has 16; use a larger network"]


def test_user_networks_need_our_server():
    values = stack(mode="client-to-existing", existingServerAddress="192.168.2.1",
                   onpremGateway=None, clientSourceCidrs=[],
                   userNetworks={"alice": ["10.0.0.0/8"]})
    values["vpn"] = {k: v for k, v in values["vpn"].items() if v not in (None, [])}
    found = problems(values)
    assert "gpu-cluster:vpn.userNetworks: is only used with vpn.mode server-on-ec2" in found
