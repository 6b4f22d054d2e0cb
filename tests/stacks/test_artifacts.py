"""Rendered artifacts through the real tools that read them."""

import subprocess

import pytest

from config import versions
from preview.report import write_artifacts
from preview.engine import run_program
from preview.stack_file import EXAMPLE_STACKS, read_stack
from tests.builders import PROJECT_DIR, example_plan, bare_metal_config, preview, require_tool
from tests.scans.rendered_steps import shellcheck_rendered_steps

# Runs a program beyond Python and bash (moto's server, promtool, curl, shellcheck):
# not in `make quick`.
pytestmark = pytest.mark.tools


@pytest.fixture(scope="module")
def lab_build(lab_plan, tmp_path_factory):
    build = tmp_path_factory.mktemp("build") / "lab"
    write_artifacts(lab_plan, build)
    return build


def test_every_rendered_step_is_valid_bash_and_shellcheck_clean(lab_build, lab_plan):
    shellcheck = require_tool("shellcheck")
    scripts = sorted(lab_build.glob("hosts/*/*.sh"))
    assert len(scripts) == len(lab_plan.of_type("command:remote:Command"))
    for script in scripts:
        syntax = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert syntax.returncode == 0, (script, syntax.stderr)
    # The envelope inlines the libraries, so: SC1091 the guarded `source` lines are not
    # taken; SC2034 library variables serve other steps; SC2317 functions are reached
    # through the case dispatch. The script files themselves are checked without excludes.
    findings = shellcheck_rendered_steps(shellcheck, scripts, "SC1091,SC2034,SC2317")
    assert not findings, findings


VARIANTS = {
    "local-path default": {"storage": {"localPath": {"path": "/dfs"}}},
    "three backends": {"storage": {"nfs": {"server": "192.0.2.20", "default": True},
                                   "efs": {"mountTargetAddress": "10.0.1.10"},
                                   "localPath": {}}},
    "time-slicing and taints": {"gpu": {"timeSlicingReplicas": 4}},
    "mig and static cpu manager": {"gpu": {"migStrategy": "single"},
                                   "tuning": {"cpuManagerPolicy": "static", "reservedCpus": "0"}},
}


def validate_manifests(plan, build, validate) -> list:
    written = sorted(build.glob("manifests/**/*.yaml"))
    rendered = [r for r in plan.resources if r.type.startswith("kubernetes:") and r.custom
                and not r.type.startswith(("kubernetes:yaml", "kubernetes:helm"))]
    assert len(written) == len(rendered)
    # A patch is checked merged onto the object it patches: a node's metadata is a whole
    # Node (the kubelet registers the rest); Dex's rollout patch in tests/kubeflow; RKE2's
    # RuntimeClass patch onto its chart's object in tests/stacks/test_rke2_runtime_class.py.
    manifests = [path for path in written if not path.name.endswith(".patch.yaml")
                 or path.name.startswith("node-")]
    assert {path.name for path in written if path not in manifests} <= {
        "deployment-dex.patch.yaml", "runtimeclass-nvidia.patch.yaml"}
    version = ".".join(versions.K0S.lstrip("v").split(".")[:2]) + ".0"
    result = subprocess.run([validate, "--strict", "-k", version, *map(str, manifests)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    return manifests


def test_lab_manifests_pass_kubernetes_validate_strict(lab_build, lab_plan):
    validate = require_tool("kubernetes-validate")
    kinds = {path.name.split("-")[0] for path in validate_manifests(lab_plan, lab_build, validate)}
    assert {"node", "runtimeclass", "daemonset", "storageclass", "deployment"} <= kinds


@pytest.mark.parametrize("changes", VARIANTS.values(), ids=VARIANTS.keys())
def test_variant_manifests_pass_kubernetes_validate_strict(tmp_path, changes):
    validate = require_tool("kubernetes-validate")
    values = bare_metal_config(workers=2)
    values.update(changes)
    values["hosts"][1]["taints"] = [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    plan = preview(values)
    write_artifacts(plan, tmp_path / "variant")
    validate_manifests(plan, tmp_path / "variant", validate)


def test_k0s_config_is_a_cluster_config_with_pinned_networking(lab_plan):
    import yaml

    from components.distributions import distribution_settings
    from components.distributions.k0s import K0s
    from config import load
    from preview.stack_file import read_stack
    from tests.builders import PROJECT_DIR

    stack = read_stack(PROJECT_DIR, "lab")
    settings = load(stack.config, stack.secret_keys, "lab")
    config = yaml.safe_load(K0s(distribution_settings(settings)).cluster_config(settings.controller))
    assert config["kind"] == "ClusterConfig"
    assert config["spec"]["api"]["address"] == "192.168.2.1"
    assert config["spec"]["network"]["calico"]["ipAutodetectionMethod"] == "kubernetes-internal-ip"
    assert config["spec"]["workerProfiles"][0]["values"]["resolvConf"] == (
        "/run/systemd/resolve/resolv.conf")
    # The same text is what install-controller writes to /etc/k0s/k0s.yaml.
    stdin = lab_plan.redact(lab_plan.named("controller-install-controller").inputs["stdin"])
    assert "kind: ClusterConfig" in stdin


def test_preview_command_writes_the_build_folder(tmp_path, capsys):
    from preview.__main__ import main

    assert main(["lab", "--build-dir", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "Resources:" in printed and "gpu-cluster:sshPrivateKey" in printed
    build = tmp_path / "lab"
    assert sorted(p.name for p in (build / "acceptance").iterdir()) == [
        "gpu-smoke.yaml", "mpijob-benchmark.yaml", "mpijob-team-nlp.yaml",
        "mpijob-team-vision.yaml", "rwx-check.yaml"]
    assert (build / "manifests" / "upstream.txt").read_text().count("mpi-operator.yaml") == 1
    assert f"Wrote {sum(1 for p in build.rglob('*') if p.is_file())} files" in printed


def test_the_program_s_warnings_are_printed_with_secrets_redacted():
    """What the program warns about reaches the preview's report, as `pulumi preview`
    shows it; a secret in a message is redacted."""
    import pulumi

    from preview.report import tree
    from tests.builders import as_cli_config

    values = bare_metal_config(workers=1)
    plan = run_program(PROJECT_DIR, as_cli_config(values), program=lambda: pulumi.log.warn(
        f"check this: {values['sshPrivateKey']}"))
    assert plan.warnings == [f"check this: {values['sshPrivateKey']}"]
    assert "Warnings:\n  warning: check this: [secret]" in tree(plan)
    assert values["sshPrivateKey"] not in tree(plan)
    assert run_program(PROJECT_DIR, as_cli_config(values), program=lambda: None).warnings == []


def test_preview_of_an_unknown_stack_fails_cleanly(tmp_path, capsys):
    from preview.__main__ import main

    assert main(["nope", "--build-dir", str(tmp_path)]) == 2
    assert "no stack file Pulumi.nope.yaml" in capsys.readouterr().err


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_every_example_stack_previews_and_its_manifests_validate(stack, tmp_path):
    validate = require_tool("kubernetes-validate")
    plan = example_plan(stack)
    written = write_artifacts(plan, tmp_path / stack)
    validate_manifests(plan, tmp_path / stack, validate)
    for path in written:
        assert not any(secret in path.read_text() for secret in plan.secrets), path


def test_the_three_layouts_have_an_example_stack():
    layouts = {read_stack(PROJECT_DIR, s).config["gpu-cluster:layout"] for s in EXAMPLE_STACKS}
    assert layouts == {"bare-metal", "hybrid", "cloud"}


def test_the_plan_lists_each_resource_after_what_it_waits_for(lab_plan):
    """plan.txt reads in run order: among siblings, whatever a resource depends on is
    listed before it (the host steps, Kubeflow's stages), and every step shows its wave."""
    from preview.report import tree

    lines = tree(lab_plan).splitlines()
    position = {}
    for index, line in enumerate(lines):
        parts = line.split("─ ", 1)
        if len(parts) == 2:
            position[parts[1].split("  ")[1]] = index
    checked = 0
    for record in lab_plan.resources:
        siblings = {r.urn for r in lab_plan.children.get(record.parent, [])}
        for urn in record.dependencies:
            if urn in siblings:
                assert position[lab_plan.by_urn[urn].name] < position[record.name], (
                    lab_plan.by_urn[urn].name, record.name)
                checked += 1
    assert checked > 20
    assert position["campos-preflight"] < position["campos-prepare-host"] < position[
        "campos-install-nvidia"] < position["campos-reboot-if-needed"]
    verify = lab_plan.named("campos-verify-boot")
    assert f"campos-verify-boot  (wave {lab_plan.depth_of(verify)})" in "\n".join(lines)
