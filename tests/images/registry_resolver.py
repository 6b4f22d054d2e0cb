"""Where a node's containerd pulls an image from, given the registry files the program
writes: containerd's host-namespace rules for hosts.toml (k0s), RKE2's registries.yaml
rules, and their schemas, each as upstream documents or codes them.

containerd (github.com/containerd/containerd, commit 301026e, Aug 2026):
- docs/hosts.md "Registry Host Namespace", "server field", "host field(s)", "override_path";
- core/remotes/docker/config/config_unix.go:25 hostPaths: `<host>_<port>_`, `<host:port>`,
  then `_default`; hosts.go:307 hostDirectory;
- hosts.go:78-135 ConfigureHosts: the file's [host] entries in file order (getSortedHosts,
  :551), then `server`, or the registry itself (registry-1.docker.io for docker.io) last;
- hosts.go:336-371 hostFileConfig (the keys a [host] table may have), :380-422
  parseHostsFile (plus `server` and `host` at the top), :424-470 parseHostConfig (the path:
  `/v2` appended unless override_path; capabilities pull, resolve, push);
- resolver.go:598 the request path: path.Join("/", host.Path, repository, "manifests", ref);
- vendor/github.com/distribution/reference/normalize.go:123 splitDockerDomain (the
  registry of a name; Docker Hub's official images under library/).
RKE2: rancher/rke2 docs/install/containerd_registry_configuration.md (at 53ce5d382^):
`mirrors.<registry>.endpoint` tried in order, then the registry itself; `rewrite` regexps
applied to the repository; `configs.<host>` with `auth` and `tls`; the key names as k3s
reads them (k3s-io/k3s pkg/agent/templates/registry.go Mirror, AuthConfig, TLSConfig).
"""

import re
import tomllib
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Optional
from urllib.parse import urlsplit

import yaml

_HOST_KEYS = {"capabilities", "ca", "client", "skip_verify", "header", "override_path",
              "dial_timeout"}
_TOP_KEYS = _HOST_KEYS | {"server", "host"}
_CAPABILITIES = {"pull", "resolve", "push"}


def split_reference(image: str) -> tuple[str, str, str]:
    """(registry, repository, tag or digest) as containerd reads a name."""
    name, at, digest = image.partition("@")
    slash, colon = name.rfind("/"), name.rfind(":")
    tag = name[colon + 1:] if colon > slash else "latest"
    name = name[:colon] if colon > slash else name
    first, _, rest = name.partition("/")
    if not rest:
        registry, repository = "docker.io", f"library/{name}"
    elif first == "localhost" or "." in first or ":" in first:
        registry, repository = ("docker.io" if first == "index.docker.io" else first), rest
    else:
        registry, repository = "docker.io", name
    if registry == "docker.io" and "/" not in repository:
        repository = f"library/{repository}"
    return registry, repository, digest if at else tag


def check_hosts_toml(text: str) -> dict:
    """The parsed file; AssertionError naming what containerd would not read as meant."""
    document = tomllib.loads(text)
    assert set(document) <= _TOP_KEYS, f"unknown keys {set(document) - _TOP_KEYS}"
    for url, table in document.get("host", {}).items():
        assert isinstance(table, dict), f"[host.{url!r}] is not a table"
        assert set(table) <= _HOST_KEYS, f"[host.{url!r}] has unknown keys {set(table) - _HOST_KEYS}"
        parts = urlsplit(url)
        assert parts.scheme in ("https", "http") and parts.netloc, f"{url} is not a URL"
        assert not parts.query and not parts.fragment, url
        capabilities = table.get("capabilities", [])
        assert isinstance(capabilities, list) and set(capabilities) <= _CAPABILITIES, capabilities
        assert isinstance(table.get("override_path", False), bool)
        ca = table.get("ca", [])
        assert isinstance(ca, (str, list)), ca
        for path in [ca] if isinstance(ca, str) else ca:
            assert PurePosixPath(path).is_absolute(), f"ca {path} is not absolute"
    return document


def host_paths(root: str, registry: str) -> list[str]:
    """config_unix.go hostPaths with hosts.go hostDirectory."""
    host, colon, port = registry.rpartition(":")
    paths = [f"{root}/{host}_{port}_"] if colon else []
    return paths + [f"{root}/{registry}", f"{root}/_default"]


def _api_root(url: str, override_path: bool) -> tuple[str, str]:
    parts = urlsplit(url)
    path = parts.path
    if path:
        path = str(PurePosixPath(path))
        if not path.endswith("/v2") and not override_path:
            path += "/v2"
    elif not override_path:
        path = "/v2"
    return f"{parts.scheme}://{parts.netloc}", path


@dataclass(frozen=True)
class Pull:
    """The manifest URLs a pull tries, in order, and the host of the first."""
    urls: tuple[str, ...]

    @property
    def first_host(self) -> str:
        return urlsplit(self.urls[0]).netloc


def resolve_containerd(files: dict[str, str], config_path: str, image: str) -> Pull:
    registry, repository, reference = split_reference(image)
    hosts: list[tuple[str, str]] = []
    document: Optional[dict] = None
    for folder in host_paths(config_path, registry):
        if f"{folder}/hosts.toml" in files:
            document = check_hosts_toml(files[f"{folder}/hosts.toml"])
            break
    if document is not None:
        for url, table in document.get("host", {}).items():
            if "pull" in table.get("capabilities", ["pull"]):
                hosts.append(_api_root(url, table.get("override_path", False)))
    server = (document or {}).get("server")
    if server:
        hosts.append(_api_root(server if server.startswith("http") else f"https://{server}",
                               (document or {}).get("override_path", False)))
    else:
        upstream = "registry-1.docker.io" if registry == "docker.io" else registry
        hosts.append((f"https://{upstream}", "/v2"))
    return Pull(tuple(f"{base}{PurePosixPath('/', path, repository, 'manifests', reference)}"
                      for base, path in hosts))


def check_registries_yaml(text: str) -> dict:
    document = yaml.safe_load(text)
    assert set(document) <= {"mirrors", "configs"}, set(document)
    for registry, mirror in (document.get("mirrors") or {}).items():
        assert set(mirror) <= {"endpoint", "rewrite"}, (registry, set(mirror))
        for endpoint in mirror.get("endpoint", []):
            parts = urlsplit(endpoint)
            assert parts.scheme in ("https", "http") and parts.netloc, endpoint
        for pattern, replacement in (mirror.get("rewrite") or {}).items():
            re.compile(pattern)
            assert isinstance(replacement, str)
    for host, config in (document.get("configs") or {}).items():
        assert set(config) <= {"auth", "tls"}, (host, set(config))
        assert set(config.get("auth") or {}) <= {"username", "password", "auth", "identity_token"}
        assert set(config.get("tls") or {}) <= {"ca_file", "cert_file", "key_file",
                                                "insecure_skip_verify"}
    return document


def resolve_rke2(text: str, image: str) -> Pull:
    document = check_registries_yaml(text)
    registry, repository, reference = split_reference(image)
    mirror = (document.get("mirrors") or {}).get(registry) or {}
    urls = []
    for endpoint in mirror.get("endpoint", []):
        rewritten = repository
        for pattern, replacement in (mirror.get("rewrite") or {}).items():
            # Go's regexp.ReplaceAllString: $1 is the first group.
            rewritten = re.sub(pattern, replacement.replace("$", "\\"), rewritten)
        base, path = _api_root(endpoint, False)
        urls.append(f"{base}{PurePosixPath('/', path, rewritten, 'manifests', reference)}")
    upstream = "registry-1.docker.io" if registry == "docker.io" else registry
    urls.append(f"https://{upstream}{PurePosixPath('/v2', repository, 'manifests', reference)}")
    return Pull(tuple(urls))
