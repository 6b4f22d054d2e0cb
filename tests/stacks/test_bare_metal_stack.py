"""Whole stacks through the offline preview: structure, order, parallelism, secrets."""

import base64
import re
import shutil

import pytest
import yaml
from cryptography import x509
from pulumi.runtime import rpc

import components.common.bundle as bundle
from components.common.step_text import step_inputs, whole_text
from preview.report import write_artifacts
from tests.builders import bare_metal_config, preview, shared_preview
from tests.stacks.steps import waits_for

WORKERS = ["moscow", "madrid", "campos"]


def deps(plan, name: str) -> set[str]:
    return waits_for(plan, name)


def test_lab_has_every_step_and_no_cloud_resources(lab_plan):
    types = {r.type for r in lab_plan.resources}
    assert not any(t.startswith("aws:") for t in types)
    commands = {r.name for r in lab_plan.of_type("command:remote:Command")}
    expected = {"controller-preflight", "controller-prepare-host", "controller-host-firewall",
                "controller-reboot-if-needed",
                "controller-verify-boot", "controller-check-version",
                "controller-install-controller", "controller-serve-nfs",
                "controller-authorized-keys", "controller-install-bundle"}
    for worker in WORKERS:
        expected |= {f"{worker}-{step}" for step in (
            "preflight", "drain-host", "prepare-host", "host-firewall", "install-nvidia",
            "reboot-if-needed",
            "verify-boot", "drain-node", "upgrade-node", "uncordon-node",
            "create-join-token", "join-worker", "admit-node", "apply-worker-profile",
            "authorized-keys", "install-bundle")}
    assert commands == expected
    assert {r.name for r in lab_plan.of_type("command:remote:CopyToRemote")} == {
        f"{host}-bundle-upload" for host in ["controller", *WORKERS]}
    assert {r.name for r in lab_plan.of_type("kubernetes:core/v1:NodePatch")} == {
        f"{w}-node-metadata" for w in WORKERS}
    assert {r.name for r in lab_plan.of_type("pulumi:providers:kubernetes")} == {
        "lab-kubernetes", "lab-kubernetes-nodes"}
    # The device plugin and the monitoring add-on's DCGM exporter.
    assert {r.inputs["metadata"]["name"] for r in lab_plan.of_type("kubernetes:apps/v1:DaemonSet")
            } == {"nvidia-device-plugin", "dcgm-exporter"}


@pytest.mark.parametrize("worker", WORKERS)
def test_worker_steps_run_in_order(lab_plan, worker):
    assert deps(lab_plan, f"{worker}-preflight") == set()
    # A joined worker's node is drained (from the controller) before its host changes.
    assert deps(lab_plan, f"{worker}-drain-host") == {f"{worker}-preflight"}
    assert deps(lab_plan, f"{worker}-prepare-host") == {f"{worker}-drain-host"}
    # The firewall before anything listens on the node's ports.
    assert deps(lab_plan, f"{worker}-host-firewall") == {f"{worker}-prepare-host"}
    assert deps(lab_plan, f"{worker}-install-nvidia") == {f"{worker}-host-firewall"}
    # A reboot if the driver or kernel arguments need one, and the check of the result,
    # before anything joins.
    assert deps(lab_plan, f"{worker}-reboot-if-needed") == {f"{worker}-install-nvidia"}
    assert deps(lab_plan, f"{worker}-verify-boot") == {f"{worker}-reboot-if-needed"}
    # The token is made right before the join, once the worker is prepared: a slow host
    # does not wait with a token that expires meanwhile.
    assert deps(lab_plan, f"{worker}-create-join-token") == {
        "controller-install-controller", f"{worker}-verify-boot", f"{worker}-upgrade-node"}
    # The release is installed by upgrade-node (the join carries no version).
    assert deps(lab_plan, f"{worker}-upgrade-node") == {
        f"{worker}-drain-node", f"{worker}-verify-boot"}
    assert deps(lab_plan, f"{worker}-join-worker") == {
        f"{worker}-verify-boot", f"{worker}-create-join-token", f"{worker}-upgrade-node"}
    assert deps(lab_plan, f"{worker}-admit-node") == {f"{worker}-join-worker"}
    # Kubelet settings changed on the controller reach a joined worker by its restart.
    assert deps(lab_plan, f"{worker}-apply-worker-profile") == {
        f"{worker}-admit-node", "controller-install-controller"}
    assert f"{worker}-apply-worker-profile" in deps(lab_plan, f"{worker}-node-metadata")


def test_controller_steps_run_in_order(lab_plan):
    assert deps(lab_plan, "controller-prepare-host") == {"controller-preflight"}
    assert deps(lab_plan, "controller-host-firewall") == {"controller-prepare-host"}
    assert deps(lab_plan, "controller-reboot-if-needed") == {"controller-host-firewall"}
    assert deps(lab_plan, "controller-install-controller") == {
        "controller-verify-boot", "controller-check-version", "lab-pki-ca-key",
        "lab-pki-ca-cert"}
    # The admin kubeconfig is built from the program's CA; the API is used only once the
    # controller is installed.
    assert "controller-install-controller" in {
        lab_plan.by_urn[d].name for d in lab_plan.named("lab-kubernetes-nodes").dependencies}
    assert "controller-install-controller" in lab_plan.all_dependencies(
        lab_plan.named("lab-kubernetes"))


def test_the_controller_gets_the_programs_ca_and_the_kubeconfig_is_signed_by_it(lab_plan):
    install = lab_plan.named("controller-install-controller").inputs
    assert rpc.is_rpc_secret(install["stdin"])  # carries the CA key
    inputs = step_inputs(lab_plan.redact(install["stdin"]))
    assert inputs["K0S_CA_KEY"] == "[secret]"
    document = yaml.safe_load(lab_plan.outputs["kubeconfig"][0])
    ca_pem = base64.b64decode(document["clusters"][0]["cluster"]["certificate-authority-data"])
    assert inputs["K0S_CA_CERT"] == ca_pem.decode()
    client = x509.load_pem_x509_certificate(
        base64.b64decode(document["users"][0]["user"]["client-certificate-data"]))
    client.verify_directly_issued_by(x509.load_pem_x509_certificate(ca_pem))


def test_no_host_waits_for_another_hosts_bootstrap(lab_plan):
    for resource in lab_plan.of_type("command:remote:Command"):
        host = resource.name.split("-")[0]
        step = resource.name[len(host) + 1:]
        if step in ("preflight", "prepare-host", "install-nvidia"):
            assert all(d.startswith(f"{host}-") for d in deps(lab_plan, resource.name))


def test_depth_does_not_grow_with_the_number_of_workers():
    # With the default kubernetes.upgrade.maxUnavailable (1): the bound is kept at run
    # time by the drain steps, never by a chain between workers.
    depths = {n: shared_preview(bare_metal_config(workers=n)).depth for n in (1, 10, 40)}
    assert len(set(depths.values())) == 1, depths


def test_removing_a_worker_drains_removes_and_resets_it(lab_plan):
    admit = lab_plan.named("moscow-admit-node")
    join = lab_plan.named("moscow-join-worker")
    # admit-node depends on join-worker, so Pulumi deletes it first: drain + delete node on
    # the controller, then reset k0s on the worker.
    assert "moscow-join-worker" in deps(lab_plan, "moscow-admit-node")
    assert admit.inputs["delete"].endswith("sudo -n bash -s -- delete")
    assert "gpu_cluster_delete()" in whole_text(admit.inputs["stdin"])
    assert "remove-node.sh" in admit.inputs["stdin"].splitlines()[0]
    assert lab_plan.redact(admit.inputs["connection"])["host"] == "192.168.2.1"
    assert "reset-node.sh" in lab_plan.redact(join.inputs["stdin"]).splitlines()[0]
    assert lab_plan.redact(join.inputs["connection"])["host"] == "192.168.2.2"


def test_kubeconfig_is_a_secret_output_and_other_outputs_are_plain(lab_plan):
    kubeconfig, secret = lab_plan.outputs["kubeconfig"]
    assert secret
    assert "server: https://192.168.2.1:6443" in kubeconfig
    assert "current-context: lab-admin" in kubeconfig
    assert lab_plan.outputs["apiEndpoint"] == ("https://192.168.2.1:6443", False)
    nodes, nodes_secret = lab_plan.outputs["nodes"]
    assert not nodes_secret
    assert [(n["name"], n["role"], n["gpus"]) for n in nodes] == [
        ("controller", "controller", 0), ("moscow", "worker", 4), ("madrid", "worker", 4),
        ("campos", "worker", 4)]


def test_credentials_from_the_controller_are_secret_and_not_logged(lab_plan):
    assert lab_plan.named("moscow-create-join-token").inputs["logging"] == "stderr"
    join = lab_plan.named("moscow-join-worker").inputs
    assert rpc.is_rpc_secret(join["stdin"])  # carries the join token
    assert "K0S_JOIN_TOKEN='[secret]'" in lab_plan.redact(join["stdin"])
    for provider in lab_plan.of_type("pulumi:providers:kubernetes"):
        assert rpc.is_rpc_secret(provider.inputs["kubeconfig"])


@pytest.mark.parametrize("worker", WORKERS)
def test_a_join_names_the_step_that_issued_its_token(lab_plan, worker):
    # A token the API refuses (expired before a retried join) is renewed by replacing
    # that step; join-worker names its URN in the error.
    issuer = lab_plan.named(f"{worker}-create-join-token").urn
    join = lab_plan.redact(lab_plan.named(f"{worker}-join-worker").inputs["stdin"])
    assert f"export K0S_JOIN_ISSUER_URN='{issuer}'" in join


def test_node_labels_and_taints_come_from_config():
    values = bare_metal_config(workers=1)
    values["hosts"][1]["labels"] = {"team": "vision"}
    values["hosts"][1]["taints"] = [{"key": "nvidia.com/gpu", "value": "present",
                                    "effect": "NoSchedule"}]
    plan = preview(values)
    patch = plan.named("gpu000-node-metadata").inputs
    # gpu-cluster/capacity=on-prem: what the on-prem Kueue flavor selects (a host that
    # runs workloads).
    assert patch["metadata"]["labels"] == {
        "gpu-cluster/capacity": "on-prem", "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "team": "vision"}
    assert patch["spec"]["taints"] == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    stdin = plan.redact(plan.named("gpu000-join-worker").inputs["stdin"])
    assert "export NODE_TAINTS='nvidia.com/gpu=present:NoSchedule'\n" in stdin
    # The kubelet registers a new node with the same labels (k0s --labels).
    assert ("export NODE_LABELS='gpu-cluster/capacity=on-prem,nvidia.com/gpu.present=true,"
            "nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB,team=vision'\n") in stdin


def test_controller_plus_worker_registers_its_own_node_without_joining():
    values = bare_metal_config(workers=0)
    values["hosts"][0]["role"] = "controller+worker"
    plan = preview(values)
    names = {r.name for r in plan.of_type("command:remote:Command")}
    assert "controller-join-worker" not in names
    assert deps(plan, "controller-admit-node") == {"controller-install-controller"}
    assert "delete" not in plan.named("controller-admit-node").inputs
    assert "export K0S_ENABLE_WORKER='true'" in plan.redact(
        plan.named("controller-install-controller").inputs["stdin"])


def test_a_changed_script_changes_only_its_own_steps(tmp_path, monkeypatch):
    """What a reviewer sees in `pulumi preview --diff` after a one-line change to
    install-nvidia.sh: the bundle step of every machine and the install-nvidia steps."""
    before_plan = preview(bare_metal_config())
    before = _stdin_by_step(before_plan)
    scripts = tmp_path / "scripts"
    shutil.copytree(bundle.SCRIPTS_DIR, scripts)
    path = scripts / "install-nvidia.sh"
    path.write_text(path.read_text().replace("set -euo pipefail", "set -euo pipefail # a change", 1))
    monkeypatch.setattr(bundle, "SCRIPTS_DIR", scripts)
    after_plan = preview(bare_metal_config())
    after = _stdin_by_step(after_plan)
    changed = sorted(name for name in before if before[name] != after[name])
    hosts = ["controller", "gpu000", "gpu001", "gpu002"]
    assert changed == sorted([*(f"{host}-install-bundle" for host in hosts),
                              "gpu000-install-nvidia", "gpu001-install-nvidia",
                              "gpu002-install-nvidia"])
    # The upload's source is another tarball (its path names the new digest).
    sources = [{r.name: r.inputs["source"]["path"]
                for r in plan_.of_type("command:remote:CopyToRemote")}
               for plan_ in (before_plan, after_plan)]
    assert sorted(sources[0]) == [f"{host}-bundle-upload" for host in hosts]
    assert all(sources[0][name] != sources[1][name] for name in sources[0])


def _stdin_by_step(plan) -> dict[str, str]:
    # Join tokens and the CA are fresh per preview; compare the scripts and other inputs.
    return {r.name: re.sub(r"(K0S_JOIN_TOKEN|K0S_CA_CERT)='[^']*'", "",
                           plan.redact(r.inputs["stdin"]))
            for r in plan.of_type("command:remote:Command")}


def test_preview_artifacts_hold_no_secret(lab_plan, tmp_path):
    written = write_artifacts(lab_plan, tmp_path / "lab")
    assert lab_plan.secrets
    names = {p.relative_to(tmp_path / "lab").as_posix() for p in written}
    assert {"plan.txt", "plan.json", "outputs.json", "kubeconfig/admin.template.yaml",
            "hosts/moscow/02-install-bundle.sh", "hosts/moscow/03-preflight.sh",
            "hosts/moscow/06-host-firewall.sh", "hosts/moscow/08-reboot-if-needed.sh",
            "hosts/moscow/09-verify-boot.sh", "hosts/moscow/13-join-worker.sh",
            "hosts/controller/09-install-controller.sh",
            f"bundle/{bundle.step_bundle().digest}/lib.sh"} <= names
    for path in written:
        text = path.read_text()
        for secret in lab_plan.secrets:
            assert secret not in text, f"a secret is in {path}"


def test_a_host_reboots_before_it_joins_and_ssh_waits_for_it(lab_plan):
    from components.common.remote_step import dial_attempts_for

    verify = lab_plan.named("moscow-verify-boot")
    connection = lab_plan.redact(verify.inputs["connection"])
    # The check that follows a reboot keeps dialing for tuning.rebootTimeoutSeconds.
    assert connection["dialErrorLimit"] == dial_attempts_for(900) > 100
    reboot = step_inputs(lab_plan.redact(lab_plan.named("moscow-reboot-if-needed").inputs["stdin"]))
    assert (reboot["SSH_PORT"], reboot["REBOOT_TIMEOUT"]) == ("22", "900")
    # The lab keeps the IOMMU on: two teams share its towers.
    assert reboot["NVIDIA_DRIVER_BRANCH"] == "580" and reboot["DISABLE_IOMMU"] == "false"
    assert step_inputs(lab_plan.redact(verify.inputs["stdin"]))["GPU_COUNT"] == "4"


def test_a_stack_can_leave_reboots_to_its_admins():
    values = bare_metal_config(workers=1)
    values["tuning"] = {"rebootWhenNeeded": False}
    plan = preview(values)
    steps = {r.name for r in plan.of_type("command:remote:Command")}
    assert not {s for s in steps if s.endswith("-reboot-if-needed")}
    # The check still runs (and only warns while a reboot is pending).
    assert deps(plan, "gpu000-verify-boot") == {"gpu000-install-nvidia"}
    assert "gpu000-verify-boot" in deps(plan, "gpu000-join-worker")


def test_a_new_cpu_manager_policy_restarts_only_the_workers_kubelets():
    from components.common.step_text import step_inputs as inputs

    before = preview(bare_metal_config(workers=2))
    values = bare_metal_config(workers=2)
    values["tuning"] = {"cpuManagerPolicy": "static", "reservedCpus": "0-1"}
    after = preview(values)

    def stdin(plan, name):
        return plan.redact(plan.named(name).inputs["stdin"])

    changed = {r.name for r in after.of_type("command:remote:Command")
               if stdin(after, r.name) != stdin(before, r.name)}
    # The controller's config (its worker profile) and each worker's restart; no join.
    assert changed == {"controller-install-controller", "gpu000-apply-worker-profile",
                       "gpu001-apply-worker-profile"}
    step = inputs(stdin(after, "gpu000-apply-worker-profile"))
    assert step["CPU_MANAGER_POLICY"] == "static"
    assert '"cpuManagerPolicy": "static"' in step["WORKER_PROFILE_VALUES"]
