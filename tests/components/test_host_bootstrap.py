"""HostBootstrap: one remote step per concern, chained, GPU steps only on GPU hosts."""

import pulumi
import pytest

from components.common.bundle import step_bundle
from components.common.remote_step import SshAccess
from components.common.step_text import whole_text
from components.distributions import distribution_for, distribution_settings
from components.hosts.bootstrap import HostBootstrap, HostBootstrapArgs
from components.hosts.steps import HostSettings
from tests.components.conftest import settings_for
from tests.builders import TEST_HOST_KEY, bare_metal_config


def bootstrap(settings, host_name: str) -> HostBootstrap:
    host = next(h for h in settings.hosts if h.name == host_name)
    return HostBootstrap(host.name, HostBootstrapArgs(
        host=host,
        ssh=SshAccess(settings.ssh, settings.ssh_private_key, settings.bastion_private_key),
        settings=HostSettings.of(settings),
        distribution=distribution_for(distribution_settings(settings)),
        control_plane_address=settings.controller.address))


def _dependency_names(plan, name):
    resource = plan.named(name)
    return sorted(plan.by_urn[d].name for d in plan.custom_dependencies(resource))


REBOOT = ["reboot-if-needed", "verify-boot"]
# One host's own key, beside the one every test host has.
HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPvBQLorBQY59OKCmXrgRZHMkIaXzJ4GpXZeV6uGFIw"
CASES = [
    # (host, config change, expected steps in order)
    ("gpu000", lambda v: None,
     ["gpu000-preflight", "gpu000-prepare-host", "gpu000-install-nvidia",
      *(f"gpu000-{step}" for step in REBOOT)]),
    ("controller", lambda v: None,
     ["controller-preflight", "controller-prepare-host",
      *(f"controller-{step}" for step in REBOOT)]),
    # Its own driver: the toolkit and the runtime still come from install-nvidia.
    ("gpu000", lambda v: v.update(nvidia={"installDriver": False}),
     ["gpu000-preflight", "gpu000-prepare-host", "gpu000-install-nvidia",
      *(f"gpu000-{step}" for step in REBOOT)]),
    ("gpu000", lambda v: v.update(nvidia={"installDriver": False, "installToolkit": False}),
     ["gpu000-preflight", "gpu000-prepare-host", *(f"gpu000-{step}" for step in REBOOT)]),
    ("gpu000", lambda v: v.update(tuning={"rebootWhenNeeded": False}),
     ["gpu000-preflight", "gpu000-prepare-host", "gpu000-install-nvidia", "gpu000-verify-boot"]),
]


@pytest.mark.parametrize("host_name, change, expected", CASES)
@pulumi.runtime.test
def test_steps_are_chained_in_order(plan, host_name, change, expected):
    values = bare_metal_config()
    change(values)
    component = bootstrap(settings_for(values), host_name)

    def check(_):
        # Every step waits for the machine's bundle step, which waits for the upload.
        bundle = f"{host_name}-install-bundle"
        names = [r.name for r in plan.of_type("command:remote:Command")]
        assert names == [bundle, *expected]
        for previous, step in zip(expected, expected[1:]):
            assert _dependency_names(plan, step) == sorted([previous, bundle])
        assert _dependency_names(plan, expected[0]) == [bundle]
        assert _dependency_names(plan, bundle) == [f"{host_name}-bundle-upload"]
        assert _dependency_names(plan, f"{host_name}-bundle-upload") == []

    return component.ready.urn.apply(check)


@pulumi.runtime.test
def test_step_inputs_travel_on_stdin_not_the_command_line(plan):
    values = bare_metal_config()
    values["tuning"] = {"disableCpuMitigations": True, "extraKernelArgs": ["pcie_aspm=off"]}
    component = bootstrap(settings_for(values), "gpu000")

    def check(_):
        prepare = plan.named("gpu000-prepare-host").inputs
        assert prepare["create"].endswith("sudo -n bash -s -- create")
        assert prepare["update"] == prepare["create"]
        assert "delete" not in prepare  # host settings are not undone
        assert "environment" not in prepare  # would need AcceptEnv on sshd
        stdin = prepare["stdin"]
        assert "export DISABLE_CPU_MITIGATIONS='true'\n" in stdin
        assert "export EXTRA_KERNEL_ARGS='pcie_aspm=off'\n" in stdin
        assert "export INOTIFY_MAX_USER_INSTANCES='2280'\n" in stdin
        # The script comes from the machine's bundle, checked against its sha256.
        bundle = step_bundle()
        assert f"'create prepare-host.sh {bundle.sha256('prepare-host.sh')}'" in stdin
        assert "gpu_cluster_create </dev/null" in whole_text(stdin)
        assert len(stdin) < 4096
        assert "triggers" not in prepare  # a trigger change would replace (and reset) the step
        nvidia = whole_text(plan.named("gpu000-install-nvidia").inputs["stdin"])
        assert "export CONTAINERD_DROPIN_PATH='/etc/k0s/containerd.d/nvidia.toml'" in nvidia
        assert 'io.containerd.cri.v1.runtime".containerd.runtimes.nvidia' in nvidia

    return component.ready.urn.apply(check)


@pulumi.runtime.test
def test_connection_uses_the_bastion_and_keeps_the_key_secret(plan):
    values = bare_metal_config()
    values["ssh"] = {"user": "ops", "bastion": {"host": "203.0.113.10", "user": "jump",
                                                "hostKey": TEST_HOST_KEY}}
    values["hosts"][2]["sshHostKey"] = HOST_KEY + " host"
    component = bootstrap(settings_for(values), "gpu001")

    def check(_):
        connection = plan.named("gpu001-preflight").inputs["connection"]
        # The whole connection is a secret because it holds the private key.
        from pulumi.runtime import rpc
        assert rpc.is_rpc_secret(connection) or rpc.is_rpc_secret(connection.get("privateKey"))
        # As the preview knows the stack's secrets: then the rest of the connection shows.
        plan.add_secrets({values["sshPrivateKey"]})
        plain = plan.redact(connection)
        assert plain["privateKey"] == "[secret]"
        assert plain["host"] == "192.168.2.3" and plain["user"] == "ops"
        assert plain["proxy"]["host"] == "203.0.113.10" and plain["proxy"]["user"] == "jump"
        assert plain["hostKey"] == HOST_KEY
        assert plain["proxy"]["hostKey"] == TEST_HOST_KEY

    return component.ready.urn.apply(check)


@pulumi.runtime.test
def test_steps_hook_into_the_bootstrap_by_what_they_declare(plan, monkeypatch):
    """Where a worker's drain-host step goes, and which step runs the drained worker's
    script with its node's inputs, follow the steps' declarations, not their names: moved
    or taken away here, the bootstrap follows them."""
    import dataclasses

    from components.hosts import bootstrap as module
    from components.hosts.bootstrap import DrainFirst
    from components.kubernetes.upgrade import DRAIN_NODE

    original = module.preparation_steps

    def moved(*args, **kwargs):
        return [dataclasses.replace(step, drain_after=step.step == "prepare-host",
                                    drained_worker_script=None)
                for step in original(*args, **kwargs)]

    settings = settings_for(bare_metal_config())
    controller = bootstrap(settings, "controller")
    monkeypatch.setattr(module, "preparation_steps", moved)
    host = next(h for h in settings.hosts if h.name == "gpu000")
    component = HostBootstrap(host.name, HostBootstrapArgs(
        host=host,
        ssh=SshAccess(settings.ssh, settings.ssh_private_key, settings.bastion_private_key),
        settings=HostSettings.of(settings),
        distribution=distribution_for(distribution_settings(settings)),
        control_plane_address=settings.controller.address,
        drain_first=DrainFirst(controller.ssh, DRAIN_NODE, {
            "DRAIN_TIMEOUT": "60", "MAX_UNAVAILABLE": "1", "SLOT_WAIT_TIMEOUT": "600",
            "KUBECTL": "k0s kubectl"}, "k0s kubectl --kubeconfig /var/lib/k0s/kubelet.conf")))

    def check(_):
        assert "gpu000-prepare-host" in _dependency_names(plan, "gpu000-drain-host")
        assert "gpu000-drain-host" in _dependency_names(plan, "gpu000-install-nvidia")
        assert "gpu000-drain-host" not in _dependency_names(plan, "gpu000-prepare-host")
        reboot = plan.named("gpu000-reboot-if-needed").inputs["stdin"]
        assert "export NODE_KUBECTL=" not in reboot and "upgrade/lib.sh" not in reboot

    return component.ready.urn.apply(check)
