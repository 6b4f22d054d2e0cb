"""Read the digest a tag names, over the registry HTTP API (the OCI distribution spec).

GET /v2/<repository>/manifests/<tag>, accepting the index types first, so a multi-arch
image is pinned by its index and not by one platform's manifest
(opencontainers/distribution-spec spec.md, "Pulling manifests"). The digest is the sha256
of the bytes received; a registry whose Docker-Content-Digest header says otherwise is
refused. Anonymous pulls get a bearer token from the realm the 401 names
(distribution/distribution docs/spec/auth/token.md, "Requesting a Token")."""

import hashlib
import re
from dataclasses import dataclass
from typing import Optional, Union

import requests

MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
# distribution/reference normalize.go: a name without a registry is Docker Hub's, a
# one-part name there is under library/, and docker.io's API is served by
# registry-1.docker.io (docker/docker registry/config.go, DefaultRegistryHost).
DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
_REFERENCE = re.compile(
    r"(?:(?P<registry>[a-z0-9.-]+(?::[0-9]+)?|localhost)/)?"
    r"(?P<repository>[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*)"
    r":(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})"
    r"(?:@(?P<digest>sha256:[0-9a-f]{64}))?")
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')
TIMEOUT = 30


class RegistryError(Exception):
    """A registry that could not be read, or answered what cannot be trusted."""


@dataclass(frozen=True)
class Reference:
    registry: str
    repository: str
    tag: str
    digest: Optional[str] = None
    text: str = ""

    @property
    def tagged(self) -> str:
        """The image as config/versions.py writes it before `pinned`: repository:tag."""
        return self.text.split("@", 1)[0]

    @property
    def api_host(self) -> str:
        return DOCKER_HUB_API if self.registry == DOCKER_HUB else self.registry


def parse(image: str) -> Reference:
    """`image` (registry/repository:tag, optionally @sha256:...), matched whole."""
    match = _REFERENCE.fullmatch(image)
    if not match:
        raise RegistryError(f"{image!r} is not an image reference with a tag")
    registry = match["registry"]
    # A first part with no dot or port is a Docker Hub namespace, not a host (normalize.go).
    if registry and "." not in registry and ":" not in registry and registry != "localhost":
        registry, repository = None, f"{registry}/{match['repository']}"
    else:
        repository = match["repository"]
    registry = registry or DOCKER_HUB
    if registry == DOCKER_HUB and "/" not in repository:
        repository = f"library/{repository}"
    return Reference(registry, repository, match["tag"], match["digest"], image)


class Client:
    """One session to any number of registries; `verify` is requests' (True or a CA file)."""

    def __init__(self, verify: Union[bool, str] = True):
        self.session = requests.Session()
        # Passed with each request: a session's own `verify` loses to REQUESTS_CA_BUNDLE
        # (requests sessions.py merge_environment_settings, psf/requests#3829).
        self.verify = verify
        self.tokens: dict[tuple[str, str], str] = {}

    def digest(self, reference: Reference) -> str:
        """The sha256 digest of the manifest or index `reference`'s tag names now."""
        url = f"https://{reference.api_host}/v2/{reference.repository}/manifests/{reference.tag}"
        response = self._get(url, reference)
        if response.status_code != 200:
            raise RegistryError(f"{url} answered HTTP {response.status_code}")
        media_type = response.headers.get("Content-Type", "").split(";")[0].strip()
        if media_type not in MANIFEST_TYPES:
            raise RegistryError(f"{url} answered {media_type or 'no content type'}, "
                                "not an image manifest or index")
        digest = "sha256:" + hashlib.sha256(response.content).hexdigest()
        claimed = response.headers.get("Docker-Content-Digest")
        if claimed and claimed != digest:
            raise RegistryError(f"{url}: the registry names {claimed}, but the manifest "
                                f"it sent hashes to {digest}")
        return digest

    def _get(self, url: str, reference: Reference) -> requests.Response:
        headers = {"Accept": ", ".join(MANIFEST_TYPES)}
        key = (reference.api_host, reference.repository)
        try:
            if key in self.tokens:
                headers["Authorization"] = f"Bearer {self.tokens[key]}"
            response = self.session.get(url, headers=headers, timeout=TIMEOUT,
                                            verify=self.verify)
            if response.status_code == 401:
                self.tokens[key] = self._token(response.headers.get("WWW-Authenticate", ""),
                                               reference)
                headers["Authorization"] = f"Bearer {self.tokens[key]}"
                response = self.session.get(url, headers=headers, timeout=TIMEOUT,
                                            verify=self.verify)
        except requests.RequestException as error:
            raise RegistryError(f"{url}: {error}") from None
        return response

    def _token(self, challenge: str, reference: Reference) -> str:
        """An anonymous pull token from the realm of a `Bearer` challenge."""
        if not challenge.startswith("Bearer "):
            raise RegistryError(f"{reference.api_host} asks for {challenge or 'credentials'} "
                                "(only anonymous bearer tokens are supported)")
        fields = dict(_CHALLENGE.findall(challenge))
        if "realm" not in fields:
            raise RegistryError(f"{reference.api_host}'s challenge names no realm")
        params = {"scope": fields.get("scope", f"repository:{reference.repository}:pull")}
        if "service" in fields:
            params["service"] = fields["service"]
        response = self.session.get(fields["realm"], params=params, timeout=TIMEOUT,
                                    verify=self.verify)
        if response.status_code != 200:
            raise RegistryError(f"{fields['realm']} refused a pull token: "
                                f"HTTP {response.status_code}")
        body = response.json()
        token = body.get("token") or body.get("access_token")
        if not token:
            raise RegistryError(f"{fields['realm']} answered no token")
        return token
