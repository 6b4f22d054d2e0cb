"""The `gpu-cluster:images` section: one image mirror for the whole cluster. Every node's
containerd pulls through it (components/distributions/registry_mirror.py), for the program's
add-ons, the distribution's own images, Kubeflow and the pods users start alike. Rules that
span sections (the password secret, the deprecated kubeflow.imageMirror) are in
`config/image_checks.py`."""

import re
from typing import Annotated, Literal, Optional

from pydantic import AfterValidator

from config.model_base import Section
from config.types import PemCertificateChain, distinct, matching

# A registry host as an image reference names it (the distribution spec's domain, with
# an optional port): what containerd's registry host namespace is (docs/hosts.md,
# "Registry Host Namespace").
_REGISTRY_HOST = re.compile(r"([a-z0-9]([a-z0-9-]*[a-z0-9])?\.)+[a-z0-9]([a-z0-9-]*[a-z0-9])?"
                            r"(:[1-9][0-9]{0,4})?|localhost(:[1-9][0-9]{0,4})?")
# A mirror: a registry host and an optional path (a Harbor proxy-cache project, an
# Artifactory remote repository) under which upstream repositories are found. No scheme,
# tag, query or anything a shell, TOML or YAML string would read specially.
_MIRROR_PREFIX = re.compile(rf"(?:{_REGISTRY_HOST.pattern})(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)*")
# A registry login: Harbor robot accounts carry '$' and '+' (robot$project+name).
_REGISTRY_USER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@$+-]{0,254}")

# The registries nodes send through the mirror whatever the stack's images are: those
# of issue 29 (Docker Hub, NVIDIA's, Quay, Kubernetes', GitHub's and Google's), which the
# program's, the distributions' and Kubeflow's images and users' pods come from.
COMMON_UPSTREAMS = ("docker.io", "nvcr.io", "quay.io", "registry.k8s.io", "ghcr.io", "gcr.io")


RegistryHost = Annotated[str, AfterValidator(matching(
    _REGISTRY_HOST, "a registry host like docker.io, ghcr.io or registry.example.internal:5000",
    max_length=253))]
# The distribution spec caps a repository name at 255 characters, prefix included.
MirrorPrefix = Annotated[str, AfterValidator(matching(
    _MIRROR_PREFIX, "a mirror like registry.example.internal:5000/proxy (a registry host, an "
    "optional port and path; no scheme or tag)", max_length=255))]
RegistryUser = Annotated[str, AfterValidator(matching(
    _REGISTRY_USER, "a registry user name (letters, digits and ._@$+-)"))]


def split_prefix(prefix: str) -> tuple[str, str]:
    """('harbor.example:5000', 'proxy/x') of 'harbor.example:5000/proxy/x'."""
    host, _, path = prefix.partition("/")
    return host, path


class ImageMirror(Section):
    """Every image the nodes pull comes from `registry`: `ghcr.io/kubeflow/x:v1` from
    `<registry>/ghcr.io/kubeflow/x:v1`, `busybox` from `<registry>/docker.io/library/busybox`,
    unless `registries` gives its registry a prefix of its own. Image names in manifests do
    not change: containerd maps them (and upstream answers only when the mirror does not)."""

    registry: MirrorPrefix
    """The mirror every node's containerd pulls every image from first: `<registry>/<upstream
    registry>/<path>` (a host, optional port and path, e.g. `harbor.example.internal/proxy`)."""
    # Per upstream registry, the prefix that replaces its host, e.g. {"docker.io":
    # "harbor.example.internal/dockerhub"} (a Harbor proxy-cache project per registry).
    registries: dict[RegistryHost, MirrorPrefix] = {}
    """Per upstream registry (`docker.io`, `nvcr.io`, ...) a prefix of its own replacing
    `<registry>/<upstream>` (a Harbor proxy-cache project each)."""
    # More upstream registries to send through the mirror, beyond COMMON_UPSTREAMS and the
    # registries of the images the cluster runs (users' own images, say).
    upstreams: Annotated[list[RegistryHost], AfterValidator(distinct)] = []
    """More upstream registries sent through the mirror, beyond `docker.io`, `nvcr.io`, `quay.io`,
    `registry.k8s.io`, `ghcr.io`, `gcr.io` and those of the pinned images."""
    # The CA (PEM) that signed the mirror's TLS certificate, for a private registry; the
    # host's trust store otherwise.
    ca: Optional[PemCertificateChain] = None
    """PEM CA certificate(s) of a private mirror's TLS certificate; default: the host's trust
    store."""
    # A login for pulls; its password is the secret gpu-cluster:imageMirrorPassword.
    username: Optional[RegistryUser] = None
    """A login for pulls; its password is the secret `imageMirrorPassword`."""
    # imagePullPolicy of Kubeflow's containers (its manifests say Always in places).
    pull_policy: Literal["IfNotPresent", "Always", "Never"] = "IfNotPresent"
    """`imagePullPolicy` of Kubeflow's containers."""

    def prefix_for(self, upstream: str) -> str:
        """Where `upstream`'s repositories are on the mirror (host and path)."""
        return self.registries.get(upstream) or f"{self.registry}/{upstream}"

    def mirror_hosts(self, upstreams: list[str]) -> list[str]:
        """The registry hosts the nodes contact for `upstreams` (credentials and CA are
        theirs), in order."""
        hosts = [split_prefix(self.prefix_for(upstream))[0] for upstream in upstreams]
        return sorted(set(hosts), key=hosts.index)


class ImagesSettings(Section):
    # One mirror for every image of the cluster; none: nodes pull from upstream.
    mirror: Optional[ImageMirror] = None
    """The mirror every node pulls every image through; unset: none."""




def split_registry(name: str) -> tuple[str, str]:
    """('docker.io', 'library/mysql:8.4') for 'mysql:8.4': the registry host an image
    reference names and the rest, as containerd's reference parser reads it (a first part
    with '.' or ':', or localhost, is a host; Docker Hub's official images are under
    library/; distribution/reference normalize.go splitDockerDomain)."""
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return first, rest
    return "docker.io", name if rest else f"library/{name}"
