"""What of kubeflow/manifests (the release pinned in config/versions.py) the program
installs, in which stage, and the images those folders run. Kept beside the overlay
generator; tests/kubeflow checks every entry against the pinned release."""

from dataclasses import dataclass

from config import versions
from config.kubeflow import KubeflowSettings


@dataclass(frozen=True)
class Stage:
    """One kustomization applied as a whole; the next stage starts once every Deployment
    and Job of this one is ready (the Kubernetes provider awaits them)."""

    name: str
    paths: tuple[str, ...]


# The order upstream's README installs in, split where a later object needs an earlier
# controller or webhook to be serving: creating a ClusterIssuer before cert-manager's
# webhook answers, or an Istio resource before istiod, fails the whole `pulumi up`.
# An object stays in the stage that first applied it: moved to another stage (another
# kustomize Directory, another parent), Pulumi would create it there and then delete it
# under the old one, removing the object it just applied. So where a release moves files
# between folders, the stage reads the new folder and the overlay drops from it what
# another stage applies (overlay.py).
# Upstream's tests/cert_manager_install.sh applies base, waits for the webhook, then
# overlays/kubeflow (which holds base too): the first stage is overlays/kubeflow without the
# ClusterIssuer, the second the ClusterIssuer alone.
CERT_MANAGER_OVERLAY = "common/cert-manager/overlays/kubeflow"
CERT_MANAGER = Stage("cert-manager", (CERT_MANAGER_OVERLAY,))
CERT_MANAGER_ISSUER = Stage("cert-manager-issuer", (CERT_MANAGER_OVERLAY,))
CLUSTER_ISSUER = ("cert-manager.io", "v1", "ClusterIssuer")
# The label every object of cert-manager's own release manifest (common/cert-manager/base/
# upstream/cert-manager.yaml) carries, but its Namespace.
CERT_MANAGER_RELEASE_LABEL = "app.kubernetes.io/instance=cert-manager"
# common/kubeflow-namespace/base holds the kubeflow namespace's NetworkPolicies since 26.03
# (v1.11.0: common/networkpolicies/base, applied by kubeflow-base): they stay in kubeflow-base.
ISTIO_CRDS = Stage("istio-crds", ("common/istio/istio-crds/base",
                                  "common/istio/istio-namespace/base",
                                  "common/kubeflow-namespace/base"))
ISTIO = Stage("istio", ("common/istio/istio-install/overlays/oauth2-proxy",))
AUTH = Stage("auth", ("common/oauth2-proxy/overlays/m2m-dex-only",
                      "common/dex/overlays/oauth2-proxy"))
KUBEFLOW_NETWORK_POLICIES = "common/kubeflow-namespace/base/kubeflow"
KUBEFLOW_BASE = Stage("kubeflow-base", ("common/kubeflow-roles/base",
                                        "common/istio/kubeflow-istio-resources/base",
                                        KUBEFLOW_NETWORK_POLICIES))
NETWORK_POLICY = ("networking.k8s.io", "v1", "NetworkPolicy")
APPS = "apps"
# Trainer's ClusterTrainingRuntimes are validated by the trainer's own webhook, so they
# are applied once the trainer controller serves it.
TRAINER_RUNTIMES = Stage("trainer-runtimes", ("applications/trainer/upstream/overlays/runtimes",))
TRAINER_RUNTIME_KIND = ("trainer.kubeflow.org", "v1alpha1", "ClusterTrainingRuntime")

# Upstream folders of each selectable component (as in upstream's example/kustomization).
COMPONENT_PATHS: dict[str, tuple[str, ...]] = {
    "profiles": ("applications/profiles/pss",),
    "dashboard": ("applications/centraldashboard/overlays/oauth2-proxy",),
    "notebooks": ("applications/admission-webhook/upstream/overlays/cert-manager",
                  "applications/jupyter/jupyter-web-app/upstream/overlays/istio",
                  "applications/jupyter/notebook-controller/upstream/overlays/kubeflow"),
    "volumes": ("applications/volumes-web-app/upstream/overlays/istio",
                "applications/pvcviewer-controller/upstream/base"),
    "tensorboards": ("applications/tensorboard/tensorboard-controller/upstream/overlays/kubeflow",
                     "applications/tensorboard/tensorboards-web-app/upstream/overlays/istio"),
    "katib": ("applications/katib/upstream/installs/katib-with-kubeflow",),
    "trainer": ("applications/trainer/overlays",),
    # Upstream's multi-user Pipelines with its example's overlay (26.03 example/kustomization.yaml).
    "pipelines": ("applications/pipeline/overlays",),
}
# Pod Security Standards "baseline" for user namespaces comes with profiles: applications/
# profiles/pss merges pod-security.kubernetes.io/enforce: baseline into the labels the profile
# controller sets (v1.11.0 merged the same label again from common/security/PSS/dynamic/
# baseline, which 26.03 removed).
# The web apps that set Secure cookies, per component: (Deployment, container). Their
# `APP_SECURE_COOKIES` env (from *WA_APP_SECURE_COOKIES=true in each base's params.env)
# is the switch upstream's README names for plain HTTP.
SECURE_COOKIE_APPS: dict[str, tuple[str, str]] = {
    "notebooks": ("jupyter-web-app-deployment", "jupyter-web-app"),
    "volumes": ("volumes-web-app-deployment", "volumes-web-app"),
    "tensorboards": ("tensorboards-web-app-deployment", "tensorboards-web-app"),
}
SECURE_COOKIES_ENV = "APP_SECURE_COOKIES"
GATEWAY = ("networking.istio.io", "v1alpha3", "Gateway", "kubeflow-gateway", "kubeflow")


@dataclass(frozen=True)
class Database:
    """A component's MySQL Deployment as upstream writes it, and the Deployments that
    cannot become ready before it answers (they read its Secret and connect at start)."""

    component: str
    deployment: str
    container: str
    volume: str
    claim: str
    # Upstream's args, which the NFS-safe setting extends (a patch replaces the list).
    args: tuple[str, ...]
    datadir: str
    # The check that the server answers: upstream's liveness command where it has one.
    probe: tuple[str, ...]
    clients: tuple[str, ...]
    namespace: str = "kubeflow"


DATABASES = (
    # applications/katib/upstream/components/mysql/mysql.yaml
    Database("katib", "katib-mysql", "katib-mysql", "katib-mysql", "katib-mysql",
             ("--datadir", "/var/lib/mysql/datadir"), "/var/lib/mysql/datadir",
             ("/bin/bash", "-c", "mysql -h 127.0.0.1 -D ${MYSQL_DATABASE} -u root "
              "-p${MYSQL_ROOT_PASSWORD} -e 'SELECT 1'"),
             ("katib-db-manager",)),
    # applications/pipeline/upstream/third-party/mysql/base/mysql-deployment.yaml: root with
    # an empty password (MYSQL_ALLOW_EMPTY_PASSWORD, base/installs/generic/mysql-secret.yaml).
    Database("pipelines", "mysql", "mysql", "mysql-persistent-storage", "mysql-pv-claim",
             ("--datadir", "/var/lib/mysql", "--authentication-policy=mysql_native_password",
              "--mysql-native-password=ON", "--disable-log-bin"), "/var/lib/mysql",
             ("mysql", "-h", "127.0.0.1", "-u", "root", "-e", "SELECT 1"),
             ("ml-pipeline", "metadata-grpc-deployment", "cache-server")),
)

# The pinned release, vendored (vendor/README.md): the overlays name its folders relatively.
VENDORED = f"vendor/kubeflow-manifests-{versions.KUBEFLOW_MANIFESTS}"
# Remote bases upstream's Pipelines folders name (third-party/argo/*/kustomization.yaml),
# and their vendored copies (project-relative). The stages read these folders from a copy
# beside the overlays (sources.upstream_copy) with each URL replaced by its copy's path;
# the vendored files themselves stay upstream's.
_ARGO = "https://github.com/argoproj/argo-workflows/manifests/{}?ref=" + versions.ARGO_WORKFLOWS
LOCAL_BASES: dict[str, str] = {
    _ARGO.format(path): f"vendor/argo-workflows-{versions.ARGO_WORKFLOWS}/manifests/{path}"
    for path in ("base/crds/minimal", "base/workflow-controller",
                 "cluster-install-no-crds/workflow-controller-rbac")}
# Trainer's JobSet (applications/trainer/upstream/third-party/jobset names the release
# asset), built from the tag and vendored (vendor/README.md). A file, not a folder:
# kustomize reads a file resource only below its kustomization, so the copy holds it there.
LOCAL_FILES: dict[str, str] = {
    f"https://github.com/kubernetes-sigs/jobset/releases/download/{versions.JOBSET}"
    "/manifests.yaml": versions.JOBSET_MANIFEST}
# The vendored folders read from the copy (sources.upstream_copy).
REWRITTEN = ("applications/pipeline", "applications/trainer")

# Image names (without tag or digest) in containers of each folder, as the folder writes
# them: the image mirror rewrites exactly these. Entries of the trainer and pipelines
# folders include the images of their remote (or vendored remote) bases.
IMAGES: dict[str, tuple[str, ...]] = {
    CERT_MANAGER_OVERLAY: ("quay.io/jetstack/cert-manager-cainjector",
                                 "quay.io/jetstack/cert-manager-controller",
                                 "quay.io/jetstack/cert-manager-webhook",
                                 "quay.io/jetstack/cert-manager-startupapicheck"),
    "common/istio/istio-install/overlays/oauth2-proxy": ("gcr.io/istio-release/install-cni",
                                                        "gcr.io/istio-release/pilot",
                                                        "gcr.io/istio-release/proxyv2"),
    "common/oauth2-proxy/overlays/m2m-dex-only": ("quay.io/oauth2-proxy/oauth2-proxy",),
    "common/dex/overlays/oauth2-proxy": ("ghcr.io/dexidp/dex",),
    "applications/profiles/pss": ("ghcr.io/kubeflow/kubeflow/kfam",
                                  "ghcr.io/kubeflow/kubeflow/profile-controller"),
    "applications/centraldashboard/overlays/oauth2-proxy": (
        "ghcr.io/kubeflow/kubeflow/central-dashboard",),
    "applications/admission-webhook/upstream/overlays/cert-manager": (
        "ghcr.io/kubeflow/kubeflow/poddefaults-webhook",),
    "applications/jupyter/jupyter-web-app/upstream/overlays/istio": (
        "ghcr.io/kubeflow/kubeflow/jupyter-web-app",),
    "applications/jupyter/notebook-controller/upstream/overlays/kubeflow": (
        "ghcr.io/kubeflow/kubeflow/notebook-controller",),
    "applications/volumes-web-app/upstream/overlays/istio": (
        "ghcr.io/kubeflow/kubeflow/volumes-web-app",),
    "applications/pvcviewer-controller/upstream/base": (
        "ghcr.io/kubeflow/kubeflow/pvcviewer-controller", "quay.io/brancz/kube-rbac-proxy"),
    "applications/tensorboard/tensorboard-controller/upstream/overlays/kubeflow": (
        "ghcr.io/kubeflow/kubeflow/tensorboard-controller", "quay.io/brancz/kube-rbac-proxy"),
    "applications/tensorboard/tensorboards-web-app/upstream/overlays/istio": (
        "ghcr.io/kubeflow/kubeflow/tensorboards-web-app",),
    "applications/katib/upstream/installs/katib-with-kubeflow": (
        "ghcr.io/kubeflow/katib/katib-controller", "ghcr.io/kubeflow/katib/katib-db-manager",
        "ghcr.io/kubeflow/katib/katib-ui", "mysql", "busybox"),
    "applications/trainer/overlays": (
        "ghcr.io/kubeflow/trainer/trainer-controller-manager", "registry.k8s.io/jobset/jobset",
        "registry.k8s.io/lws/lws"),
    "applications/trainer/upstream/overlays/runtimes": (
        "ghcr.io/kubeflow/trainer/dataset-initializer", "ghcr.io/kubeflow/trainer/deepspeed-runtime",
        "ghcr.io/kubeflow/trainer/mlx-runtime", "ghcr.io/kubeflow/trainer/model-initializer",
        "ghcr.io/kubeflow/trainer/torchtune-trainer", "pytorch/pytorch"),
    "applications/pipeline/overlays": (
        "ghcr.io/kubeflow/kfp-api-server", "ghcr.io/kubeflow/kfp-frontend",
        "ghcr.io/kubeflow/kfp-cache-server", "ghcr.io/kubeflow/kfp-metadata-writer",
        "ghcr.io/kubeflow/kfp-metadata-envoy", "ghcr.io/kubeflow/kfp-persistence-agent",
        "ghcr.io/kubeflow/kfp-scheduled-workflow-controller",
        "ghcr.io/kubeflow/kfp-viewer-crd-controller", "ghcr.io/kubeflow/kfp-visualization-server",
        "gcr.io/tfx-oss-public/ml_metadata_store_server", "mysql", "chrislusf/seaweedfs",
        "quay.io/argoproj/workflow-controller", "quay.io/argoproj/argoexec",
        "ghcr.io/metacontroller/metacontroller", "docker.io/alpine/k8s", "busybox"),
}


def stages_for(kubeflow: KubeflowSettings) -> list[Stage]:
    """The stages the selected components need, in install order."""
    selected = [c for c in COMPONENT_PATHS if c in kubeflow.components]
    paths = tuple(path for component in selected for path in COMPONENT_PATHS[component])
    stages = [CERT_MANAGER, CERT_MANAGER_ISSUER, ISTIO_CRDS, ISTIO, AUTH, KUBEFLOW_BASE]
    if paths:
        stages.append(Stage(APPS, paths))
    if "trainer" in selected:
        stages.append(TRAINER_RUNTIMES)
    return stages


def images_of(stage: Stage) -> list[str]:
    return sorted({image for path in stage.paths for image in IMAGES.get(path, ())})
