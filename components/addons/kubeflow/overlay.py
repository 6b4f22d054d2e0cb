"""The kustomize overlay of each Kubeflow install stage, as files (name -> text): upstream
folders as resources (the vendored release, a local copy, or another git ref), plus the
project's patches: the known fixes, the Dex user, the gateway exposure and the image
mirror. Files only, so the tests build exactly these overlays with the real
`kubectl kustomize`."""

from collections.abc import Sequence
from pathlib import Path

import yaml

from components.addons.kubeflow import catalog
from components.addons.kubeflow.dex import StaticLogin, dex_config
from components.addons.kubeflow.image_mirror import install_record, pull_policy_replacements
from components.addons.kubeflow.sources import KUSTOMIZATION, base_reference
from config import versions
from config.kubeflow import KubeflowSettings

GATEWAY_NAMESPACE = "istio-system"
GATEWAY_SERVICE = "istio-ingressgateway"
# Secrets the program creates itself (from secret config and random bytes) instead of
# upstream's published values; their namespaces are created one stage earlier.
DEX_PASSWORDS_SECRET = "dex-passwords"
DEX_CLIENT_SECRET = "dex-oidc-client"
OAUTH2_PROXY_SECRET = "oauth2-proxy-credentials"
SECRET_NAMESPACES = {"auth": {"pod-security.kubernetes.io/enforce": "restricted"},
                     "oauth2-proxy": {"pod-security.kubernetes.io/enforce": "restricted"}}
MYSQL_UID = 999
# The gateway's certificate and key (kubernetes.io/tls), made by the program; Istio reads
# a Gateway's credentialName from the gateway workload's namespace.
GATEWAY_TLS_SECRET = "kubeflow-gateway-tls"
# Pulumi waits for a Deployment 10 minutes unless the object's `pulumi.com/timeoutSeconds`
# says otherwise; Directory children get no customTimeouts (pulumi-kubernetes v4.32.0
# provider/pkg/await/await.go:306-308, metadata/overrides.go:49-63,
# provider/kustomize/v2/directory.go:169). A database may take its startup allowance and
# this margin on top: scheduling, binding its claim, pulling the image, and its clients'
# crash-loop back-off (capped at 5 minutes by the kubelet).
TIMEOUT_ANNOTATION = "pulumi.com/timeoutSeconds"
AWAIT_MARGIN_SECONDS = 600


def render_stage(kubeflow: KubeflowSettings, stage: catalog.Stage, overlay_dir: Path,
                 logins: Sequence[StaticLogin] = (), public_url: str = "") -> dict[str, str]:
    """The files of one stage's overlay; `logins` and `public_url` (the URL users open,
    where Dex's connectors send them back) go into Dex's config."""
    kustomization: dict = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [base_reference(kubeflow, p, overlay_dir) for p in stage.paths],
    }
    files: dict[str, str] = {}
    patches: list[dict] = []
    if stage.name == catalog.CERT_MANAGER.name:
        files["api-check.yaml"] = _dump_all(cert_manager_api_check())
        # Applied by the next stage, once the webhook answers.
        patches.append(_delete_all(*catalog.CLUSTER_ISSUER))
    elif stage.name == catalog.CERT_MANAGER_ISSUER.name:
        # The ClusterIssuer alone: the rest of the folder is the previous stage's.
        patches += [_delete_labelled(catalog.CERT_MANAGER_RELEASE_LABEL),
                    _delete_all("", "v1", "Namespace"), _delete_all(*catalog.NETWORK_POLICY)]
    elif stage.name == catalog.ISTIO_CRDS.name:
        files["secret-namespaces.yaml"] = _dump_all(secret_namespaces())
        # Applied by kubeflow-base, as before 26.03 (catalog.KUBEFLOW_BASE).
        patches.append(_delete_all(*catalog.NETWORK_POLICY, namespace="kubeflow"))
    elif stage.name == catalog.ISTIO.name:
        patches.append(_gateway_patch(kubeflow))
    elif stage.name == catalog.AUTH.name:
        patches += _auth_patches(kubeflow, logins, public_url)
    elif stage.name == catalog.KUBEFLOW_BASE.name:
        # The kubeflow namespace's NetworkPolicies without the namespace (istio-crds made it).
        patches.append(_delete_all("", "v1", "Namespace", "kubeflow"))
        if kubeflow.access.tls.mode != "off":
            patches.append(_gateway_tls_patch())
    elif stage.name == catalog.APPS:
        for database in catalog.DATABASES:
            if database.component in kubeflow.components:
                patches += _database_patches(kubeflow, database)
        if kubeflow.access.tls.mode == "off":
            patches += _insecure_cookie_patches(kubeflow)
        if "trainer" in kubeflow.components:
            patches.append(_delete_all(*catalog.TRAINER_RUNTIME_KIND))
        if "profiles" in kubeflow.components and kubeflow.user is not None:
            files["user-profile.yaml"] = _dump_all([user_profile(kubeflow)])
    if patches:
        kustomization["patches"] = patches
    if kubeflow.image_mirror is not None:
        # Image names stay upstream's: every node's containerd pulls them through the
        # cluster's mirror (images.mirror); only the pull policy is set here.
        files["install-record.yaml"] = _dump_all([install_record(kubeflow, stage)])
        kustomization["replacements"] = pull_policy_replacements(stage)
    kustomization["resources"] += sorted(files)
    header = (f"# Kubeflow install stage '{stage.name}' of kubeflow/manifests "
              f"{kubeflow.source.ref}, generated by gpu-cluster at every run; do not edit.\n")
    return {KUSTOMIZATION: header + _dump(kustomization), **files}


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (patches, Dex's config) as literal blocks, readable in review."""


_Dumper.add_representer(str, lambda dumper, text: dumper.represent_scalar(
    "tag:yaml.org,2002:str", text, style="|" if "\n" in text else None))


def _dump(document: object) -> str:
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False)


def _dump_all(objects: list[dict]) -> str:
    return yaml.dump_all(objects, Dumper=_Dumper, sort_keys=False)


def _patch(patch: object, kind: str, name: str = None, namespace: str = None,
           group: str = None) -> dict:
    target = {"kind": kind}
    for key, value in (("group", group), ("name", name), ("namespace", namespace)):
        if value is not None:
            target[key] = value
    text = patch if isinstance(patch, str) else _dump(patch)
    return {"patch": text, "target": target}


def _delete_all(group: str, version: str, kind: str, name: str = None,
                namespace: str = None) -> dict:
    """Removes the matching upstream objects from the build."""
    metadata = {"name": name or "any"}
    if namespace:
        metadata["namespace"] = namespace
    body = {"$patch": "delete", "apiVersion": f"{group}/{version}" if group else version,
            "kind": kind, "metadata": metadata}
    return _patch(body, kind, name, namespace, group)


def _delete_labelled(selector: str) -> dict:
    """Removes every upstream object with the label (kustomize's patch target labelSelector;
    the target, not the body, selects what is deleted)."""
    body = {"$patch": "delete", "apiVersion": "v1", "kind": "Any", "metadata": {"name": "any"}}
    return {"patch": _dump(body), "target": {"labelSelector": selector}}


# --- cert-manager: wait until its API (and webhook) really answers ----------------------


def cert_manager_api_check() -> list[dict]:
    """The Helm chart's startupapicheck Job: a dry-run Certificate through the webhook,
    retried for a minute per attempt. The provider waits for the Job to complete, so the
    next stage's ClusterIssuer never meets a webhook without its CA bundle."""
    namespace, name = "cert-manager", "cert-manager-api-check"
    rbac = "rbac.authorization.k8s.io"
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": name, "namespace": namespace}},
        {"apiVersion": f"{rbac}/v1", "kind": "Role",
         "metadata": {"name": name, "namespace": namespace},
         "rules": [{"apiGroups": ["cert-manager.io"], "resources": ["certificates"],
                    "verbs": ["create"]}]},
        {"apiVersion": f"{rbac}/v1", "kind": "RoleBinding",
         "metadata": {"name": name, "namespace": namespace},
         "roleRef": {"apiGroup": rbac, "kind": "Role", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
        {"apiVersion": "batch/v1", "kind": "Job",
         "metadata": {"name": name, "namespace": namespace},
         "spec": {"backoffLimit": 6, "template": {"spec": {
             "serviceAccountName": name,
             # Its one credential, mounted explicitly where in-cluster clients look for it.
             "automountServiceAccountToken": False,
             "volumes": [{"name": "api-token", "projected": {"sources": [
                 {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}},
                 {"configMap": {"name": "kube-root-ca.crt",
                                "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                 {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
                     "fieldPath": "metadata.namespace"}}]}}]}}],
             "restartPolicy": "OnFailure",
             "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                                 "seccompProfile": {"type": "RuntimeDefault"}},
             "containers": [{
                 "name": "api-check",
                 "image": versions.CERT_MANAGER_API_CHECK_IMAGE,
                 "args": ["check", "api", "--wait=1m", "-v"],
                 "resources": {"requests": {"cpu": "10m", "memory": "32Mi"},
                               "limits": {"memory": "64Mi"}},
                 "volumeMounts": [{"name": "api-token", "readOnly": True,
                                   "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                 "securityContext": {"allowPrivilegeEscalation": False,
                                     "capabilities": {"drop": ["ALL"]},
                                     "readOnlyRootFilesystem": True},
             }],
         }}}},
    ]


def secret_namespaces() -> list[dict]:
    """auth and oauth2-proxy as upstream defines them, created early so the program's
    secrets exist before Dex and oauth2-proxy start."""
    return [{"apiVersion": "v1", "kind": "Namespace",
             "metadata": {"name": name, "labels": labels}}
            for name, labels in SECRET_NAMESPACES.items()]


# --- Istio: how the ingress gateway is exposed ------------------------------------------


def _gateway_patch(kubeflow: KubeflowSettings) -> dict:
    access = kubeflow.access
    spec: dict = {}
    metadata: dict = {"name": GATEWAY_SERVICE, "namespace": GATEWAY_NAMESPACE}
    if access.mode == "nodePort":
        # Users open `nodePort`: the gateway's HTTPS port, or HTTP with tls off.
        name, port = ("http2", 80) if access.tls.mode == "off" else ("https", 443)
        spec = {"type": "NodePort",
                "ports": [{"name": name, "port": port, "protocol": "TCP",
                           "nodePort": access.node_port}]}
    elif access.mode == "loadBalancer":
        spec = {"type": "LoadBalancer", "loadBalancerSourceRanges": list(access.source_ranges)}
        # The address comes from the cloud's load-balancer controller, possibly later than
        # this run; users reach the UI by `hostname`, so the run does not wait for it.
        metadata["annotations"] = {"pulumi.com/skipAwait": "true"}
    else:
        spec = {"type": "ClusterIP"}
    return _patch({"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": spec},
                  "Service", GATEWAY_SERVICE, GATEWAY_NAMESPACE)


def gateway_port(kubeflow: KubeflowSettings) -> int:
    """The gateway Service's port users reach (the port-forward's target)."""
    return 80 if kubeflow.access.tls.mode == "off" else 443


def _gateway_tls_patch() -> dict:
    """Kubeflow's Gateway serves HTTPS with the program's certificate and redirects
    HTTP to it (Istio's Gateway API: ServerTLSSettings mode SIMPLE, credentialName,
    httpsRedirect; https://istio.io/latest/docs/reference/config/networking/gateway/).
    The servers list is replaced whole (a custom resource's lists have no merge key)."""
    group, version, kind, name, namespace = catalog.GATEWAY
    gateway = {"apiVersion": f"{group}/{version}", "kind": kind,
               "metadata": {"name": name, "namespace": namespace},
               "spec": {"servers": [
                   {"port": {"number": 80, "name": "http", "protocol": "HTTP"},
                    "hosts": ["*"], "tls": {"httpsRedirect": True}},
                   {"port": {"number": 443, "name": "https", "protocol": "HTTPS"},
                    "hosts": ["*"],
                    "tls": {"mode": "SIMPLE", "credentialName": GATEWAY_TLS_SECRET}},
               ]}}
    return _patch(gateway, kind, name, namespace, group)


def _insecure_cookie_patches(kubeflow: KubeflowSettings) -> list[dict]:
    """Plain HTTP (tls off): the web apps' CSRF cookie without the Secure flag, or the
    browser drops it and every POST answers 403 "Could not find CSRF cookie XSRF-TOKEN"
    (kubeflow/kubeflow crud_backend/csrf.py). Upstream's README names this switch."""
    patches = []
    for component, (deployment, container) in catalog.SECURE_COOKIE_APPS.items():
        if component not in kubeflow.components:
            continue
        body = {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": deployment, "namespace": "kubeflow"},
                "spec": {"template": {"spec": {"containers": [{
                    "name": container,
                    "env": [{"name": catalog.SECURE_COOKIES_ENV, "value": "false"}]}]}}}}
        patches.append(_patch(body, "Deployment", deployment, "kubeflow"))
    return patches


# --- Auth: the configured Dex user, the program's secrets -------------------------------


def _auth_patches(kubeflow: KubeflowSettings, logins: Sequence[StaticLogin],
                  public_url: str) -> list[dict]:
    dex_map = {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "dex", "namespace": "auth"},
               "data": {"config.yaml": dex_config(kubeflow, logins, public_url)}}
    env = [{"name": name, "valueFrom": {"secretKeyRef": {"name": OAUTH2_PROXY_SECRET, "key": key}}}
           for name, key in (("OAUTH2_PROXY_CLIENT_ID", "client-id"),
                             ("OAUTH2_PROXY_CLIENT_SECRET", "client-secret"),
                             ("OAUTH2_PROXY_COOKIE_SECRET", "cookie-secret"))]
    if kubeflow.access.tls.mode != "off":
        # The session cookie only over HTTPS (upstream: FORCE_HTTPS=false, for plain HTTP);
        # null drops upstream's valueFrom.
        env.append({"name": "OAUTH2_PROXY_COOKIE_SECURE", "value": "true", "valueFrom": None})
    proxy = {"apiVersion": "apps/v1", "kind": "Deployment",
             "metadata": {"name": "oauth2-proxy", "namespace": "oauth2-proxy"},
             "spec": {"template": {"spec": {"containers": [{"name": "oauth2-proxy", "env": env}]}}}}
    return [
        _patch(dex_map, "ConfigMap", "dex", "auth"),
        _patch(proxy, "Deployment", "oauth2-proxy", "oauth2-proxy"),
        # Upstream's published values; the program creates these from config and randomness.
        _delete_all("", "v1", "Secret", DEX_PASSWORDS_SECRET, "auth"),
        _delete_all("", "v1", "Secret", DEX_CLIENT_SECRET, "auth"),
        _delete_all("", "v1", "Secret", "oauth2-proxy", "oauth2-proxy"),
        # Created one stage earlier (they must exist before the secrets in them).
        *[_delete_all("", "v1", "Namespace", name) for name in SECRET_NAMESPACES],
    ]


def user_profile(kubeflow: KubeflowSettings) -> dict:
    """The configured user's profile (namespace), instead of upstream's example one."""
    return {"apiVersion": "kubeflow.org/v1beta1", "kind": "Profile",
            "metadata": {"name": kubeflow.user.profile_name},
            "spec": {"owner": {"kind": "User", "name": kubeflow.user.email}}}


# --- MySQL (Katib's, Pipelines'): first initialisation on slow storage, NFS -----------


def _database_patches(kubeflow: KubeflowSettings, database: catalog.Database) -> list[dict]:
    settings_path = f"kubeflow.{database.component}.mysql"
    mysql = getattr(kubeflow, database.component).mysql
    period = 10
    container: dict = {
        "name": database.container,
        # The liveness probe only starts once this succeeds: first initialisation may
        # take startupTimeoutSeconds without the pod being killed half way. Until it
        # succeeds the pod is not ready, so Pulumi's await waits for a serving database.
        "startupProbe": {"exec": {"command": list(database.probe)}, "periodSeconds": period,
                         "failureThreshold": -(-mysql.startup_timeout_seconds // period),
                         "timeoutSeconds": 5},
    }
    pod: dict = {"containers": [container]}
    if mysql.nfs_safe:
        # Native AIO with O_DIRECT is not supported on NFS; InnoDB falls back to
        # simulated AIO only when told.
        container["args"] = [*database.args, "--innodb-use-native-aio=0"]
        # NFS volumes ignore fsGroup: fail with a clear message, not an InnoDB trace. The
        # marker's leading dot keeps `mysqld --initialize` from calling the data directory
        # non-empty (mysql-server 8.0 sql/mysqld.cc initialize_create_data_directory:
        # "Ignore files that start with . or == 'lost+found'").
        pod["initContainers"] = [{
            "name": "check-volume-writable",
            "image": versions.BUSYBOX_IMAGE,
            # Init containers are outside the mirror's pull-policy replacement.
            "imagePullPolicy": (kubeflow.image_mirror.pull_policy if kubeflow.image_mirror
                                else "IfNotPresent"),
            "command": ["sh", "-c",
                        f"mkdir -p {database.datadir} && touch {database.datadir}/.gpu-cluster "
                        f"|| {{ echo '{database.deployment}: the volume is not writable by uid "
                        f"{MYSQL_UID}: its folder on the export must be (the provisioner makes it mode "
                        f"0777; root on a node is squashed and cannot chown it), or "
                        f"set gpu-cluster:{settings_path}.storageClass' >&2; exit 1; }}"],
            "volumeMounts": [{"name": database.volume, "mountPath": "/var/lib/mysql"}],
            "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True,
                                "runAsUser": MYSQL_UID, "runAsGroup": MYSQL_UID,
                                "capabilities": {"drop": ["ALL"]},
                                "seccompProfile": {"type": "RuntimeDefault"}},
        }]
    timeout = {TIMEOUT_ANNOTATION: str(mysql.startup_timeout_seconds + AWAIT_MARGIN_SECONDS)}
    namespace = database.namespace
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": database.deployment, "namespace": namespace,
                               "annotations": timeout},
                  "spec": {"template": {"spec": pod}}}
    claim_spec: dict = {"resources": {"requests": {"storage": mysql.storage_size}}}
    if mysql.storage_class:
        claim_spec["storageClassName"] = mysql.storage_class
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": {"name": database.claim, "namespace": namespace}, "spec": claim_spec}
    patches = [_patch(deployment, "Deployment", database.deployment, namespace),
               _patch(claim, "PersistentVolumeClaim", database.claim, namespace)]
    for client in database.clients:
        body = {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": client, "namespace": namespace, "annotations": timeout}}
        patches.append(_patch(body, "Deployment", client, namespace))
    return patches
