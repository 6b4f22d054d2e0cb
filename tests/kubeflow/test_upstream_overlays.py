"""The Kubeflow overlays against the real pinned release, vendored in vendor/, built by the
real `kubectl kustomize`: the same overlay code the program writes. Trainer's folder is left
out of the builds here (tests/kubeflow/test_offline_build.py builds it, with its JobSet read
from vendor/; Trainer's runtimes stage is included).
Fixtures: tests/kubeflow/conftest.py; helpers: tests/kubeflow/overlays.py."""

import os
import subprocess

import pytest
import yaml

from components.addons.kubeflow import catalog
from components.addons.kubeflow import overlay
from config import versions
from tests.builders import PROJECT_DIR, require_tool
from tests.kubeflow.overlays import (MIRROR, HUB_MIRROR, UPSTREAM_SECRETS, BUILTIN_GROUPS,
                                     kubectl, settings, stages_of, build, write, key,
                                     containers, find, selected, overlay_name)


def test_every_stage_builds_and_every_patch_hits_an_upstream_object_and_container(built):
    checked = 0
    for stage, (kustomization, objects, upstream) in built.items():
        assert objects, stage
        upstream_keys = {key(o) for o in upstream}
        for entry in kustomization.get("patches", []):
            target = entry["target"]
            if target.get("kind") == catalog.TRAINER_RUNTIME_KIND[2]:
                continue  # in the trainer folder, which needs GitHub (see the next stage)
            matches = selected(upstream, target)
            assert matches, (stage, target)
            patch = yaml.safe_load(entry["patch"])
            if isinstance(patch, dict) and "spec" in patch and patch.get("$patch") != "delete":
                wanted = {c["name"] for c in patch["spec"].get("template", {}).get(
                    "spec", {}).get("containers", [])}
                have = {c["name"] for o in matches for c in containers(o)}
                assert wanted <= have, (stage, target, wanted, have)
            if isinstance(patch, dict) and patch.get("$patch") == "delete":
                # Really gone from the build.
                assert not ({key(o) for o in matches} & {key(o) for o in objects}), target
            checked += 1
        # The stage adds only the program's own objects beside upstream's.
        added = {key(o) for o in objects} - upstream_keys
        assert {k[0] for k in added} <= {"ServiceAccount", "Role", "RoleBinding", "Job",
                                         "Namespace", "ConfigMap", "Profile"}, (stage, added)
    # 1 gateway Service, 7 auth, 1 Gateway (TLS), 3 katib-mysql (Deployment, claim, client);
    # the folders 26.03 shares between stages: 1 ClusterIssuer (cert-manager), 3 (issuer:
    # cert-manager's release, its Namespace and NetworkPolicies), 1 (istio-crds: the kubeflow
    # namespace's NetworkPolicies), 1 (kubeflow-base: the kubeflow Namespace)
    assert checked == 18


def test_each_shared_folder_is_applied_once_across_its_stages(built):
    """26.03 moved files between folders (cert-manager's ClusterIssuer into overlays/kubeflow
    with the release; the kubeflow namespace's NetworkPolicies into kubeflow-namespace): each
    of their objects is applied by exactly one stage, and none is lost."""
    for first, second in ((catalog.CERT_MANAGER, catalog.CERT_MANAGER_ISSUER),
                          (catalog.ISTIO_CRDS, catalog.KUBEFLOW_BASE)):
        upstream = {key(o) for o in built[first.name][2]} | {key(o) for o in built[second.name][2]}
        applied = [key(o) for stage in (first, second) for o in built[stage.name][1]]
        assert len(applied) == len(set(applied))
        assert upstream <= set(applied), upstream - set(applied)
    issuer = {key(o) for o in built[catalog.CERT_MANAGER_ISSUER.name][1]}
    assert issuer & {key(o) for o in built[catalog.CERT_MANAGER_ISSUER.name][2]} == {
        ("ClusterIssuer", "", "kubeflow-self-signing-issuer")}


# The release before (its test fixture, ../shared/fixtures/README.md) and the folders its
# stages read, so an upgrade is checked to move no object from one stage to another.
PREVIOUS = PROJECT_DIR.parent / "shared/fixtures/upstream/kubeflow-manifests-v1.11.0"
PREVIOUS_STAGES = {
    catalog.CERT_MANAGER.name: ("common/cert-manager/base",),
    catalog.CERT_MANAGER_ISSUER.name: ("common/cert-manager/kubeflow-issuer/base",),
    catalog.KUBEFLOW_BASE.name: ("common/kubeflow-roles/base",
                                 "common/istio/kubeflow-istio-resources/base",
                                 "common/networkpolicies/base"),
}


def test_no_object_of_the_previous_release_moves_to_another_stage(built, tmp_path):
    """A stage is a kustomize Directory, its objects Pulumi resources under it: an object
    that moves to another stage is created under the new one and then deleted under the old
    one, which deletes it from the cluster (pulumi/pulumi-kubernetes#4278)."""
    if not PREVIOUS.is_dir():
        pytest.skip(f"{PREVIOUS} is absent (kubeflow/manifests v1.11.0 fixture)")
    previous: dict[tuple, str] = {}
    for stage in stages_of(settings()):
        folder = tmp_path / stage.name
        folder.mkdir()
        paths = PREVIOUS_STAGES.get(stage.name, stage.paths)
        (folder / "kustomization.yaml").write_text(yaml.safe_dump({"resources": [
            os.path.relpath(PREVIOUS / p, folder) for p in paths]}))
        for obj in build(folder):
            # The program's moves, then as now: the secrets' namespaces one stage early.
            early = obj["kind"] == "Namespace" and obj["metadata"]["name"] in overlay.SECRET_NAMESPACES
            previous[key(obj)] = catalog.ISTIO_CRDS.name if early else stage.name
    now = {key(o): stage for stage, (_, objects, _) in built.items() for o in objects}
    common = set(previous) & set(now)
    assert len(common) > 250
    assert not {k: (previous[k], now[k]) for k in common if previous[k] != now[k]}


def test_katib_mysql_survives_first_initialisation_and_nfs(built):
    _, objects, upstream = built[catalog.APPS]
    deployment = find(objects, "Deployment", "katib-mysql")
    pod = deployment["spec"]["template"]["spec"]
    [mysql] = [c for c in pod["containers"] if c["name"] == "katib-mysql"]
    startup = mysql["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 1200
    assert startup["exec"] == mysql["livenessProbe"]["exec"]  # the same check, upstream's
    assert "--innodb-use-native-aio=0" in mysql["args"]
    assert mysql["args"][:2] == ["--datadir", "/var/lib/mysql/datadir"]
    [check] = pod["initContainers"]
    assert check["securityContext"]["runAsUser"] == mysql["securityContext"]["runAsUser"] == 999
    assert check["volumeMounts"] == mysql["volumeMounts"]
    claim = find(objects, "PersistentVolumeClaim", "katib-mysql")
    assert claim["spec"]["storageClassName"] == "nfs"
    # Upstream's liveness probe alone (no startup probe) is what killed it in seed 000.
    upstream_mysql = find(upstream, "Deployment", "katib-mysql")["spec"]["template"]["spec"]
    assert "startupProbe" not in upstream_mysql["containers"][0]


def test_every_container_image_keeps_its_name_and_is_pulled_by_policy(built):
    """Names stay upstream's: every node's containerd pulls them through the mirror
    (images.mirror, which kubeflow.imageMirror is read as; tests/images/test_mirror.py)."""
    images = 0
    for stage, (_, objects, _) in built.items():
        for obj in objects:
            for container in containers(obj):
                image = container["image"]
                if image.startswith(("{{", "$")):  # Istio's injection templates, env refs
                    continue
                images += 1
                assert not image.startswith((f"{MIRROR}/", f"{HUB_MIRROR}/")), (stage, key(obj), image)
                if obj["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
                    assert container.get("imagePullPolicy") == "IfNotPresent", (key(obj), container["name"])
    assert images >= 30
    mysql = find(built[catalog.APPS][1], "Deployment", "katib-mysql")
    assert mysql["spec"]["template"]["spec"]["containers"][0]["image"] == "mysql:8.0"


def test_the_image_catalog_matches_the_pinned_release(built):
    """Every image an offline folder runs is in the catalog, and no entry is stale (our own
    additions aside)."""
    ours = {"quay.io/jetstack/cert-manager-startupapicheck", "busybox"}
    for stage, (_, _, upstream) in built.items():
        names = {overlay_name(c["image"]) for o in upstream for c in containers(o)
                 if not c["image"].startswith(("{{", "$"))}
        listed = set(catalog.images_of(next(s for s in stages_of(settings()) if s.name == stage)))
        assert names <= listed, (stage, names - listed)
        assert listed - names <= ours, (stage, listed - names)


def test_no_upstream_example_user_or_secret_survives(built):
    everything = yaml.safe_dump_all([o for _, objects, _ in built.values() for o in objects])
    for value in UPSTREAM_SECRETS:
        assert value not in everything
    _, auth, upstream = built[catalog.AUTH.name]
    assert "user@example.com" in yaml.safe_dump_all(upstream)  # the fixture has it...
    assert "user@example.com" not in yaml.safe_dump_all(auth)  # ...the build does not
    names = {key(o) for o in auth}
    for secret, namespace in ((overlay.DEX_PASSWORDS_SECRET, "auth"),
                              (overlay.DEX_CLIENT_SECRET, "auth")):
        assert ("Secret", namespace, secret) not in names  # the program creates them
    assert not [o for o in auth if o["kind"] == "Secret"]
    config = yaml.safe_load(find(auth, "ConfigMap", "dex")["data"]["config.yaml"])
    [user] = config["staticPasswords"]
    assert user["email"] == "ada@example.com" and user["hashFromEnv"] == "DEX_USER_PASSWORD"
    proxy = find(auth, "Deployment", "oauth2-proxy")["spec"]["template"]["spec"]["containers"][0]
    refs = {e["valueFrom"]["secretKeyRef"]["name"] for e in proxy["env"]
            if "secretKeyRef" in e.get("valueFrom", {})}
    assert refs == {overlay.OAUTH2_PROXY_SECRET}
    dex = find(auth, "Deployment", "dex")["spec"]["template"]["spec"]["containers"][0]
    assert {e["secretRef"]["name"] for e in dex["envFrom"]} == {
        overlay.DEX_CLIENT_SECRET, overlay.DEX_PASSWORDS_SECRET}
    profiles = [o for o in built[catalog.APPS][1] if o["kind"] == "Profile"]
    assert [p["spec"]["owner"]["name"] for p in profiles] == ["ada@example.com"]


def test_namespaces_created_early_are_upstream_s_and_no_object_is_in_two_stages(built):
    early = {o["metadata"]["name"]: o for o in built[catalog.ISTIO_CRDS.name][1]
             if o["kind"] == "Namespace"}
    upstream_auth = {o["metadata"]["name"]: o for o in built[catalog.AUTH.name][2]
                     if o["kind"] == "Namespace"}
    assert set(upstream_auth) == set(overlay.SECRET_NAMESPACES)
    for name, namespace in upstream_auth.items():
        assert early[name]["metadata"].get("labels") == namespace["metadata"].get("labels")
    seen: dict = {}
    for stage, (_, objects, _) in built.items():
        for obj in objects:
            assert key(obj) not in seen, (key(obj), seen.get(key(obj)), stage)
            seen[key(obj)] = stage


def test_trainer_runtimes_wait_for_the_trainer_webhook(built):
    runtimes = [o for o in built[catalog.TRAINER_RUNTIMES.name][1]
                if o["kind"] == catalog.TRAINER_RUNTIME_KIND[2]]
    assert len(runtimes) >= 3
    # The apps stage must not carry them (its trainer folder does, upstream).
    kustomization = built[catalog.APPS][0]
    assert any(yaml.safe_load(p["patch"]).get("$patch") == "delete"
               and p["target"]["kind"] == catalog.TRAINER_RUNTIME_KIND[2]
               for p in kustomization["patches"])


def test_cert_manager_api_check_runs_the_release_s_own_check(built):
    _, objects, _ = built[catalog.CERT_MANAGER.name]
    controller = find(objects, "Deployment", "cert-manager")["spec"]["template"]["spec"]
    tag = controller["containers"][0]["image"].rsplit(":", 1)[1]
    assert versions.CERT_MANAGER_API_CHECK_IMAGE.endswith(f":{tag}")
    job = find(objects, "Job", "cert-manager-api-check")
    assert job["metadata"]["namespace"] == "cert-manager"


@pytest.mark.parametrize("tls", ["selfSigned", "off"])
@pytest.mark.parametrize("mode, service_type", [("nodePort", "NodePort"),
                                                ("loadBalancer", "LoadBalancer"),
                                                ("portForward", "ClusterIP")])
def test_gateway_is_exposed_as_configured(tmp_path, mode, service_type, tls):
    kubeflow = settings(access={"mode": mode, "nodePort": 31390, "hostname": "kubeflow.example.com",
                                "sourceRanges": ["198.51.100.0/24"] if mode == "loadBalancer" else [],
                                "tls": {"mode": tls}},
                        imageMirror=None)
    kubectl()
    write(kubeflow, catalog.ISTIO, tmp_path / "istio")
    service = find(build(tmp_path / "istio"), "Service", overlay.GATEWAY_SERVICE)
    assert service["spec"]["type"] == service_type
    ports = {p["port"]: p for p in service["spec"]["ports"]}
    # Upstream's ports and target ports, kept.
    assert ports[80]["targetPort"] == 8080 and ports[443]["targetPort"] == 8443
    # Users' port is the gateway's HTTPS port, or HTTP with tls off.
    users = 80 if tls == "off" else 443
    assert overlay.gateway_port(kubeflow) == users
    assert (ports[users].get("nodePort") == 31390) == (mode == "nodePort")
    assert all(p.get("nodePort") != 31390 for number, p in ports.items() if number != users)
    if mode == "loadBalancer":
        assert service["spec"]["loadBalancerSourceRanges"] == ["198.51.100.0/24"]


def test_built_kubernetes_objects_pass_kubernetes_validate_strict(built, tmp_path):
    validate = require_tool("kubernetes-validate")
    version = ".".join(versions.K0S.lstrip("v").split(".")[:2]) + ".0"
    objects = [o for _, built_objects, _ in built.values() for o in built_objects
               if o["apiVersion"].rpartition("/")[0] in BUILTIN_GROUPS]
    path = tmp_path / "kubeflow.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    result = subprocess.run([validate, "--strict", "-k", version, str(path)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr
    assert result.stdout.count(" passed for resource ") == len(objects) > 250
