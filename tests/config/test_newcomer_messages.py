"""Mistakes a first stack file makes (seed 000's cluster written from the README): each
message says what to do, at its key, all of them at once."""

from config import ConfigError
from tests.config.loading import loads, problem_lines
from tests.builders import bare_metal_config


def test_an_unquoted_off_where_text_is_meant_says_quote_it():
    values = bare_metal_config(workers=1)
    values["network"]["cni"] = False  # `cni: off` read by a YAML 1.1 parser
    values["hosts"][1]["interface"] = True  # `interface: on`
    assert problem_lines(values) == [
        "gpu-cluster:hosts[1] (gpu000).interface: Input should be a valid string (got True); "
        "an unquoted yes, no, on, off, true or false is read as a boolean: quote the word "
        "(\"off\")",
        "gpu-cluster:network.cni: Input should be 'calico' or 'kuberouter' (got False); an "
        "unquoted yes, no, on, off, true or false is read as a boolean: quote the word "
        "(\"off\")"]


def test_the_lan_s_network_and_broadcast_addresses_are_no_host_s():
    values = bare_metal_config(workers=2)
    values["hosts"][1]["address"] = "192.168.2.0"
    values["hosts"][2]["address"] = "192.168.2.255"
    assert problem_lines(values) == [
        "gpu-cluster:hosts[1] (gpu000).address: 192.168.2.0 is the network address of "
        "gpu-cluster:network.lanCidr 192.168.2.0/24, which no host can have; give the host's "
        "own address",
        "gpu-cluster:hosts[2] (gpu001).address: 192.168.2.255 is the broadcast address of "
        "gpu-cluster:network.lanCidr 192.168.2.0/24, which no host can have; give the host's "
        "own address"]


def test_a_point_to_point_lan_has_no_reserved_address():
    values = bare_metal_config(workers=1)
    values["network"]["lanCidr"] = "192.168.2.0/31"
    values["hosts"][0]["address"], values["hosts"][1]["address"] = "192.168.2.0", "192.168.2.1"
    try:
        loads(values)
    except ConfigError as error:
        assert not [p for p in error.problems if p.path.endswith(".address")], error


def test_required_keys_list_what_they_take():
    values = bare_metal_config(workers=1)
    del values["storage"], values["layout"]
    assert problem_lines(values) == [
        "gpu-cluster:layout: is required: bare-metal, hybrid or cloud",
        "gpu-cluster:storage: is required: a section with one or more of nfs, efs, localPath"]


def test_secret_hints_read_files_from_stdin():
    from config.messages import set_secret_command

    assert set_secret_command("gpu-cluster:sshPrivateKey") == (
        "pulumi config set --secret gpu-cluster:sshPrivateKey < ~/.ssh/id_ed25519")
    assert set_secret_command("gpu-cluster:vpnClientProfile") == (
        "pulumi config set --secret gpu-cluster:vpnClientProfile < profile.ovpn")
    assert set_secret_command("gpu-cluster:kubeflowPassword") == (
        "pulumi config set --secret gpu-cluster:kubeflowPassword")
    assert set_secret_command("gpu-cluster:kubeflowPasswordHashes.ada") == (
        "pulumi config set --secret --path 'gpu-cluster:kubeflowPasswordHashes.ada' "
        "\"$(htpasswd -nBC 12 '' | tr -d ':\\n')\"")


def test_a_plain_text_bastion_key_is_told_to_come_from_its_file():
    values = bare_metal_config(workers=1)
    values["ssh"]["bastion"] = {"host": "192.168.2.250", "hostKey": values["hosts"][0]["sshHostKey"]}
    values["bastionPrivateKey"] = values["sshPrivateKey"]
    lines = problem_lines(values, secret=("sshPrivateKey",))
    assert ("gpu-cluster:bastionPrivateKey: must be a secret, but it is set in plain text; "
            "remove it and set it with `pulumi config set --secret "
            "gpu-cluster:bastionPrivateKey < bastion_key`") in lines


def test_every_newcomer_mistake_is_reported_at_once():
    values = bare_metal_config(workers=2)
    values["hosts"][1]["interface"] = False
    values["hosts"][2]["address"] = "192.168.2.255"
    del values["storage"]
    lines = problem_lines(values, secret=())
    assert [line.split(": ")[0] for line in lines] == [
        "gpu-cluster:hosts[1] (gpu000).interface", "gpu-cluster:hosts[2] (gpu001).address",
        "gpu-cluster:sshPrivateKey", "gpu-cluster:storage"], lines


def test_a_broken_key_does_not_hide_the_other_checks_of_its_section():
    # `cni: off` breaks the network section; the hosts are still checked against lanCidr.
    values = bare_metal_config(workers=2)
    values["network"]["cni"] = False
    values["hosts"][2]["address"] = "192.168.2.255"
    assert [line.split(": ")[0] for line in problem_lines(values)] == [
        "gpu-cluster:hosts[2] (gpu001).address", "gpu-cluster:network.cni"]


def test_no_cross_check_speaks_of_a_broken_key_s_default():
    # An invalid podCidr is not checked at its default (10.244.0.0/16) against the LAN.
    values = bare_metal_config(workers=1)
    values["network"] = {"lanCidr": "10.244.0.0/16", "podCidr": "10.244.0.0/33"}
    values["hosts"][0]["address"], values["hosts"][1]["address"] = "10.244.0.1", "10.244.0.2"
    assert [line.split(": ")[0] for line in problem_lines(values)] == [
        "gpu-cluster:network.podCidr"]
