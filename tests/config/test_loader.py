"""Config layer: valid stacks load, with their defaults; every example stack file loads.
What the loader refuses, and how it says so: test_refusals.py."""

from config import load
from preview.stack_file import EXAMPLE_STACKS, read_stack
from tests.config.loading import loads, set_path
from tests.builders import PROJECT_DIR, bare_metal_config, cloud_config, hybrid_config


def test_valid_bare_metal_config_loads_with_defaults():
    settings = loads(bare_metal_config())
    assert settings.layout == "bare-metal"
    assert settings.controller.name == "controller"
    assert [w.name for w in settings.workers] == ["gpu000", "gpu001", "gpu002"]
    assert settings.network.pod_cidr == "10.244.0.0/16"
    assert settings.kubernetes.version.startswith("v1.36")
    assert settings.tuning.inotify_max_user_instances == 2280
    assert settings.ssh_private_key.get_secret_value().startswith("-----BEGIN")
    assert "PRIVATE KEY" not in repr(settings)


def test_cluster_name_defaults_to_the_stack_name():
    values = bare_metal_config()
    del values["clusterName"]
    assert loads(values).cluster_name == "test"


def test_every_example_stack_file_loads():
    stacks = list(EXAMPLE_STACKS)
    assert "lab" in stacks
    for stack in stacks:
        stack_file = read_stack(PROJECT_DIR, stack)
        settings = load(stack_file.config, stack_file.secret_keys, stack=stack)
        assert settings.cluster_name


def test_nfs_mount_options_take_what_nfs5_allows():
    values = bare_metal_config()
    options = ["nfsvers=4.2", "soft", "timeo=150", "retrans=3", "proto=tcp", "sec=krb5p:sys",
               "lookupcache=positive", "nconnect=8", "noatime", "_netdev", "clientaddr=10.0.0.5"]
    values["storage"]["nfs"]["mountOptions"] = options
    assert loads(values).storage.nfs.mount_options == options


def test_a_valid_cloud_config_loads():
    settings = loads(cloud_config())
    assert settings.layout == "cloud" and settings.pools[0].gpus == 4
    assert settings.network.lan_cidr is None and not settings.hosts


def test_ssh_from_anywhere_needs_the_explicit_override():
    values = hybrid_config()
    values["aws"]["adminCidrs"] = ["0.0.0.0/0"]
    values["aws"]["allowSshFromAnywhere"] = True
    assert loads(values).aws.admin_cidrs == ["0.0.0.0/0"]


def test_nvswitch_is_auto_by_default_and_takes_the_cli_strings():
    values = bare_metal_config()
    assert loads(values).hosts[1].nvswitch == "auto"
    # `pulumi config set --path 'hosts[1].nvswitch' true` stores the string.
    for given, loaded in (("true", True), ("false", False), (True, True), ("auto", "auto")):
        set_path("hosts[1].nvswitch", given)(values)
        assert loads(values).hosts[1].nvswitch == loaded
