"""Katib's and Pipelines' MySQL in the stages built from the vendored release
(tests/kubeflow/conftest.py): startup allowance, NFS-safe settings, Pulumi's await."""

import subprocess

import yaml

from components.addons.kubeflow import catalog
from components.addons.kubeflow import overlay
from config import versions
from tests.builders import require_tool
from tests.kubeflow.overlays import (MIRROR, HUB_MIRROR, PIPELINES, key, containers, find,
                                     overlay_name)


def reads_secret(obj: dict, secret: str) -> bool:
    """Whether a workload takes anything from the Secret (env, envFrom, volume)."""
    found = []

    def walk(node):
        if isinstance(node, dict):
            for name in ("secretKeyRef", "secretRef"):
                if isinstance(node.get(name), dict) and node[name].get("name") == secret:
                    found.append(node)
            if isinstance(node.get("secret"), dict) and node["secret"].get("secretName") == secret:
                found.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)
    walk(obj)
    return bool(found)


def awaited(objects: list[dict]) -> dict[str, int]:
    return {o["metadata"]["name"]: int(o["metadata"]["annotations"][overlay.TIMEOUT_ANNOTATION])
            for o in objects if o["kind"] == "Deployment"
            and overlay.TIMEOUT_ANNOTATION in o["metadata"].get("annotations", {})}


def check_database(database: catalog.Database, objects: list[dict], upstream: list[dict],
                   secret: str, allowance: int, storage_class: str, size: str) -> None:
    deployment = find(objects, "Deployment", database.deployment)
    pod = deployment["spec"]["template"]["spec"]
    [mysql] = [c for c in pod["containers"] if c["name"] == database.container]
    [upstream_mysql] = [c for c in find(upstream, "Deployment", database.deployment)[
        "spec"]["template"]["spec"]["containers"] if c["name"] == database.container]
    # Upstream has no startup probe: its first initialisation could be killed (Katib) or
    # counted ready before MySQL answers (Pipelines: no probe at all).
    assert "startupProbe" not in upstream_mysql
    startup = mysql["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= allowance
    assert startup["exec"]["command"] == list(database.probe)
    if "livenessProbe" in upstream_mysql:
        assert startup["exec"] == upstream_mysql["livenessProbe"]["exec"]
    # NFS-safe: upstream's args (checked against the pinned release) plus no native AIO.
    assert mysql["args"] == upstream_mysql["args"] + ["--innodb-use-native-aio=0"]
    assert upstream_mysql["args"] == list(database.args)
    assert mysql["args"][mysql["args"].index("--datadir") + 1] == database.datadir
    [check] = pod["initContainers"]
    assert check["securityContext"]["runAsUser"] == mysql["securityContext"]["runAsUser"] == 999
    assert check["volumeMounts"] == [m for m in mysql["volumeMounts"]
                                     if m["mountPath"] == "/var/lib/mysql"]
    assert check["image"] == versions.BUSYBOX_IMAGE
    [volume] = [v for v in pod["volumes"] if v["name"] == database.volume]
    claim = find(objects, "PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"])
    assert claim["metadata"]["name"] == database.claim
    assert claim["spec"]["storageClassName"] == storage_class
    assert claim["spec"]["resources"]["requests"]["storage"] == size
    # Pulumi waits for the database and every Deployment that reads its Secret (they
    # cannot be ready before it answers) at least the startup allowance; no other.
    clients = {o["metadata"]["name"] for o in objects
               if o["kind"] == "Deployment" and reads_secret(o, secret)}
    assert clients - {database.deployment} == set(database.clients)
    timeouts = awaited(objects)
    assert set(timeouts) & ({o["metadata"]["name"] for o in upstream}) == \
        {database.deployment, *database.clients}
    assert all(value >= allowance + 300 for name, value in timeouts.items()
               if name in {database.deployment, *database.clients})
    assert not awaited(upstream)  # upstream: Pulumi's default 10 minutes


def test_katib_mysql_and_its_client_are_awaited_for_the_startup_allowance(built):
    _, objects, upstream = built[catalog.APPS]
    [katib] = [d for d in catalog.DATABASES if d.component == "katib"]
    check_database(katib, objects, upstream, "katib-mysql-secrets", 1200, "nfs", "10Gi")


def test_pipelines_mysql_patches_hit_the_pinned_release(pipelines_built):
    kustomization, objects, upstream = pipelines_built
    hits = 0
    for entry in kustomization["patches"]:
        target = entry["target"]
        [match] = [o for o in upstream if o["kind"] == target["kind"]
                   and o["metadata"]["name"] == target["name"]
                   and o["metadata"]["namespace"] == target["namespace"]]
        patch = yaml.safe_load(entry["patch"])
        wanted = {c["name"] for c in patch.get("spec", {}).get("template", {}).get(
            "spec", {}).get("containers", [])}
        assert wanted <= {c["name"] for c in containers(match)}, (target, wanted)
        hits += 1
    assert hits == 5  # mysql Deployment and claim, 3 clients
    assert {key(o) for o in objects} - {key(o) for o in upstream} == {
        ("ConfigMap", "kube-system", "gpu-cluster-kubeflow-apps")}


def test_every_pipelines_image_is_in_the_catalog_and_keeps_its_name(pipelines_built):
    """As for the offline folders: Pipelines' images, its Argo bases' included, are in the
    catalog (which images.txt lists; the profile controller's docker.io/alpine/k8s was
    missed before it was listed), under upstream's names, which every node's containerd
    pulls through images.mirror (tests/images/test_mirror.py)."""
    _, objects, upstream = pipelines_built
    names = {overlay_name(c["image"]) for o in upstream for c in containers(o)}
    listed = set(catalog.IMAGES[PIPELINES])
    assert names <= listed, names - listed
    # argoexec is the executor image the controller is told (an argument, not a container).
    assert listed - names <= {"busybox", "quay.io/argoproj/argoexec"}
    for obj in objects:
        for container in containers(obj):
            assert not container["image"].startswith((f"{MIRROR}/", f"{HUB_MIRROR}/")), \
                (key(obj), container["image"])


def test_pipelines_mysql_is_on_the_same_footing_as_katib_s(pipelines_built):
    _, objects, upstream = pipelines_built
    [pipelines] = [d for d in catalog.DATABASES if d.component == "pipelines"]
    check_database(pipelines, objects, upstream, "mysql-secret", 1200, "nfs", "20Gi")


def test_pipelines_mysql_objects_pass_kubernetes_validate_strict(pipelines_built, tmp_path):
    validate = require_tool("kubernetes-validate")
    version = ".".join(versions.K0S.lstrip("v").split(".")[:2]) + ".0"
    _, objects, _ = pipelines_built
    [pipelines] = [d for d in catalog.DATABASES if d.component == "pipelines"]
    names = {pipelines.deployment, pipelines.claim, *pipelines.clients}
    checked = [o for o in objects if o["metadata"]["name"] in names
               and o["kind"] in ("Deployment", "PersistentVolumeClaim")]
    assert len(checked) == len(names)
    path = tmp_path / "pipelines.yaml"
    path.write_text(yaml.safe_dump_all(checked))
    result = subprocess.run([validate, "--strict", "-k", version, str(path)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr
