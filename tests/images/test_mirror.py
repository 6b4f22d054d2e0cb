"""One image mirror for the whole cluster (images.mirror): the files every node's containerd
reads are in containerd's and RKE2's documented formats (parsed with TOML and YAML parsers,
checked against their schemas: tests/images/registry_resolver.py cites them), every image of
every example stack, and of a stack with every add-on, is pulled from the mirror first, and
the stack's images.txt lists only images the mirror serves."""

import dataclasses
import json
import tomllib

import pytest

from components.addons.cluster_images import known_images
from components.aws.boot import boot_scripts
from components.common.step_text import step_inputs
from components.distributions.registry_mirror import PASSWORD_MARK
from config.loader import load
from preview.engine import run_program, unwrap_secrets
from preview.host_files import _user_data
from preview.images import image_lines, images_txt
from preview.stack_file import EXAMPLE_STACKS, read_stack
from tests.builders import PROJECT_DIR, bare_metal_config, preview
from tests.images.registry_resolver import (check_hosts_toml, check_registries_yaml,
                                            resolve_containerd, resolve_rke2, split_reference)
from tests.kubeflow.certificates import make_certificate

CA, _ = make_certificate("harbor.example.internal", days=3650)
PASSWORD = "s3cr&t-Pa$$w0rd'x"
MIRROR = {"registry": "harbor.example.internal/proxy",
          "registries": {"docker.io": "harbor.example.internal:8443/dockerhub"},
          "ca": CA, "username": "robot$gpu+pull"}
COMMON = {"docker.io", "nvcr.io", "quay.io", "registry.k8s.io", "ghcr.io", "gcr.io"}


def with_mirror(values: dict, mirror: dict = MIRROR) -> dict:
    return {**values, "images": {"mirror": mirror}, "imageMirrorPassword": PASSWORD}


def registry_steps(plan) -> list[tuple[str, dict]]:
    """(machine, configure-registries' inputs) over SSH and at boot."""
    found = [(r.name, step_inputs(unwrap_secrets(r.inputs["stdin"])))
             for r in plan.of_type("command:remote:Command")
             if r.name.endswith("-configure-registries")]
    for resource, user_data in _user_data(plan):
        boot_scripts(user_data)
        found += [(resource.name, step_inputs(stdin))
                  for name, stdin in plan.boot_steps(user_data)
                  if name == "configure-registries"]
    return found


def files_of(env: dict) -> dict[str, tuple[str, str]]:
    return {env[f"REGISTRY_FILE_{n}_PATH"]: (env[f"REGISTRY_FILE_{n}_CONTENT"],
                                            env[f"REGISTRY_FILE_{n}_MODE"])
            for n in range(1, int(env["REGISTRY_FILE_COUNT"]) + 1)}


def expected_prefix(image: str) -> tuple[str, str]:
    """The mirror host and the path a pull of `image` must start with."""
    registry, _, _ = split_reference(image)
    if registry == "docker.io":
        return "harbor.example.internal:8443", "/v2/dockerhub/"
    return "harbor.example.internal", f"/v2/proxy/{registry}/"


def assert_served(pulls: dict) -> None:
    wrong = {}
    for image, pull in pulls.items():
        host, path = expected_prefix(image)
        first = pull.urls[0]
        if pull.first_host != host or not first.split(host, 1)[1].startswith(path):
            wrong[image] = first
    assert not wrong, f"pulled elsewhere than the mirror first: {wrong}"


def resolve_all(files: dict, images) -> dict:
    if "/etc/rancher/rke2/registries.yaml" in files:
        text = files["/etc/rancher/rke2/registries.yaml"][0]
        return {image: resolve_rke2(text, image) for image in images}
    [dropin] = [path for path in files if path.endswith("/registries.toml")]
    config_path = tomllib.loads(files[dropin][0])["plugins"][
        "io.containerd.cri.v1.images"]["registry"]["config_path"]
    texts = {path: text for path, (text, _) in files.items()}
    return {image: resolve_containerd(texts, config_path, image) for image in images}


def test_k0s_nodes_get_containerd_hosts_files_in_its_documented_schema():
    plan = preview(with_mirror(bare_metal_config(workers=1)))
    steps = registry_steps(plan)
    assert {name for name, _ in steps} == {"controller-configure-registries",
                                           "gpu000-configure-registries"}
    files = files_of(steps[0][1])
    dropin, mode = files["/etc/k0s/containerd.d/registries.toml"]
    # k0s docs/runtime.md: containerd 2 drop-ins are config v3; version 2 or the
    # io.containerd.grpc.v1.cri plugin makes k0s exit.
    document = tomllib.loads(dropin)
    assert document["version"] == 3 and "io.containerd.grpc.v1.cri" not in dropin
    registry = document["plugins"]["io.containerd.cri.v1.images"]["registry"]
    assert registry["config_path"] == "/etc/k0s/containerd.d/certs.d"
    # docs/cri/registry.md: credentials per registry host (the mirror's), never in hosts.toml.
    assert registry["configs"] == {
        host: {"auth": {"username": "robot$gpu+pull", "password": PASSWORD_MARK}}
        for host in ("harbor.example.internal:8443", "harbor.example.internal")}
    assert mode == "0600"
    hosts = {path: text for path, (text, _) in files.items() if path.endswith("/hosts.toml")}
    folders = {path.split("/")[-2] for path in hosts}
    assert COMMON <= folders
    for path, text in hosts.items():
        parsed = check_hosts_toml(text)
        assert "server" not in parsed, "upstream stays the last resort"
        [(url, table)] = parsed["host"].items()
        assert table == {"capabilities": ["pull", "resolve"], "override_path": True,
                         "ca": "/etc/k0s/containerd.d/certs.d/gpu-cluster-mirror-ca.crt"}
        assert PASSWORD not in text and PASSWORD_MARK not in text
    assert files["/etc/k0s/containerd.d/certs.d/gpu-cluster-mirror-ca.crt"][0] == CA.strip() + "\n"


def test_rke2_nodes_get_registries_yaml_in_its_documented_format():
    values = with_mirror(bare_metal_config(workers=1))
    values["kubernetes"] = {"distribution": "rke2", "version": "v1.36.3+rke2r1"}
    plan = preview(values)
    [(_, env), *_] = registry_steps(plan)
    files = files_of(env)
    assert set(files) == {"/etc/rancher/rke2/registries.yaml",
                          "/etc/rancher/rke2/gpu-cluster-mirror-ca.crt"}
    text, mode = files["/etc/rancher/rke2/registries.yaml"]
    document = check_registries_yaml(text)
    assert mode == "0600" and COMMON <= set(document["mirrors"])
    assert document["mirrors"]["ghcr.io"] == {
        "endpoint": ["https://harbor.example.internal"],
        "rewrite": {"^(.*)$": "proxy/ghcr.io/$1"}}
    assert document["configs"]["harbor.example.internal"] == {
        "auth": {"username": "robot$gpu+pull", "password": PASSWORD_MARK},
        "tls": {"ca_file": "/etc/rancher/rke2/gpu-cluster-mirror-ca.crt"}}
    # RKE2 reads the file when it starts: a change restarts its running units.
    assert env["REGISTRY_SERVICES"] == "rke2-server.service rke2-agent.service"


def _example_with_mirror(stack: str, more: dict = {}):
    stack_file = read_stack(PROJECT_DIR, stack)
    config = {**stack_file.config, "gpu-cluster:images": json.dumps({"mirror": MIRROR}),
              "gpu-cluster:imageMirrorPassword": PASSWORD, **more}
    stack_file = dataclasses.replace(
        stack_file, config=config,
        secret_keys=[*stack_file.secret_keys, "gpu-cluster:imageMirrorPassword"])
    plan = run_program(PROJECT_DIR, stack_file)
    settings = load(stack_file.config, stack_file.secret_keys, stack=stack)
    return plan, settings


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_every_image_of_every_example_stack_is_pulled_from_the_mirror(stack):
    plan, settings = _example_with_mirror(stack)
    images = set(known_images(settings.kubernetes, settings.network.cni)) | set(image_lines(images_txt(plan, settings, {})))
    steps = registry_steps(plan)
    assert steps, f"{stack}: no machine configures the mirror"
    for machine, env in steps:
        assert_served(resolve_all(files_of(env), images))


def test_the_mirror_password_reaches_no_file_of_the_build_folder(tmp_path):
    from preview.report import write_artifacts
    plan, settings = _example_with_mirror("prod")
    written = write_artifacts(plan, tmp_path, {"images.txt": images_txt(plan, settings, {})})
    leaked = [str(path) for path in written if PASSWORD in path.read_text()]
    assert not leaked
    # Over SSH it is a secret input of the step: redacted wherever the plan is shown.
    [(_, env), *_] = registry_steps(plan)
    assert env["REGISTRY_PASSWORD"] == PASSWORD


def test_a_stack_with_every_addon_has_an_images_txt_the_mirror_serves_whole():
    # prod: Kubeflow, teams' queues (Kueue), the MPI operator, monitoring and the NFS
    # provisioner; plus GPU Feature Discovery.
    plan, settings = _example_with_mirror("prod", {
        "gpu-cluster:gpu": json.dumps({"featureDiscovery": True})})
    assert settings.kubeflow is not None and settings.access.teams and settings.mpi.operator
    lines = image_lines(images_txt(plan, settings, {}))
    # Every add-on's images are there: Kueue, the MPI operator, monitoring, Kubeflow's
    # (pinned ones carry their digest after the tag).
    tagged = {line.split("@")[0] for line in lines}
    for image in ("registry.k8s.io/kueue/kueue:v0.19.2", "mpioperator/mpi-operator:0.8.0",
                  "quay.io/prometheus/prometheus:v3.14.0", "ghcr.io/dexidp/dex:v2.45.0",
                  "quay.io/k0sproject/coredns:1.14.6-k0s.0",
                  "nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless"):
        assert image in tagged
    [(_, env), *_] = registry_steps(plan)
    assert_served(resolve_all(files_of(env), lines))


def test_pool_instances_read_the_password_from_ssm_and_their_user_data_stays_small():
    import base64
    from tests.builders import cloud_config
    values = with_mirror(cloud_config())
    plan = preview(values)
    pool = values["pools"][0]["name"]
    [template] = [t for t in plan.of_type("aws:ec2/launchTemplate:LaunchTemplate")
                  if t.name.endswith(f"-{pool}-template")]
    # EC2 refuses user data over 16 KiB: the files go to the boot plan in S3, not there.
    assert len(base64.b64decode(template.inputs["userData"])) <= 4096
    steps = dict(registry_steps(plan))
    parameter = f"/gpu-cluster/test/{pool}/image-mirror-password"
    assert steps[template.name]["REGISTRY_PASSWORD_SSM_PARAMETER"] == parameter
    assert "REGISTRY_PASSWORD" not in steps[template.name]
    plans = [r.inputs.get("content", "") for r in plan.of_type("aws:s3/bucketObjectv2:BucketObjectv2")]
    assert not any(PASSWORD in str(text) for text in plans)
    [stored] = [r for r in plan.of_type("aws:ssm/parameter:Parameter")
                if r.inputs.get("name") == parameter]
    assert stored.inputs["type"] == "SecureString"
    # Only the pool's own role reads it.
    policies = [r for r in plan.of_type("aws:iam/rolePolicy:RolePolicy")
                if parameter.lstrip("/") in json.dumps(r.inputs, default=str)]
    assert policies and all(f"-{pool}-node" in r.name for r in policies)
