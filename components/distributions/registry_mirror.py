"""The image mirror as a distribution's containerd reads it, rendered here and written on
every node by configure-registries.sh (components/hosts/steps.py). Two forms:

- containerd's registry host namespaces (k0s): one `hosts.toml` per upstream registry in a
  folder the CRI plugin's `config_path` names (containerd docs/hosts.md; k0s docs/runtime.md
  "Configuring OCI registry mirrors", a drop-in in /etc/k0s/containerd.d);
- RKE2's `/etc/rancher/rke2/registries.yaml` (`mirrors` with `endpoint` and `rewrite`,
  `configs` with `auth` and `tls`; rancher/rke2 docs/install/containerd_registry_configuration.md,
  removed with the docs in commit 53ce5d382, now docs.rke2.io), which RKE2 turns into the
  same hosts.toml files itself.

Strings are validated by config/images.py and written as TOML basic / YAML double-quoted
strings (json.dumps: both read its escapes). The password never appears here: the text holds
PASSWORD_MARK, which the script replaces on the host with the secret it is given."""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from config.images import ImageMirror, split_prefix

# Replaced on the host by the secret gpu-cluster:imageMirrorPassword (config/image_checks.py
# keeps '"' and '\' out of it, so it needs no escaping inside the quotes it lands in).
PASSWORD_MARK = "@GPU_CLUSTER_REGISTRY_PASSWORD@"


@dataclass(frozen=True)
class RegistryFile:
    path: str
    content: str
    mode: str = "0644"


def _quote(text: str) -> str:
    return json.dumps(text)


def host_directory(upstream: str) -> str:
    """The folder containerd looks for first: `host_port_` for `host:port`
    (core/remotes/docker/config/hosts.go hostDirectory, config_unix.go hostPaths)."""
    host, colon, port = upstream.rpartition(":")
    return f"{host}_{port}_" if colon else upstream


def mirror_url(mirror: ImageMirror, upstream: str) -> tuple[str, bool]:
    """The `[host."..."]` key for `upstream` and whether it needs override_path: with a
    path, the URL is the API root itself (`/v2` and the path), which override_path tells
    containerd (hosts.go parseHostConfig: without it, a path not ending in /v2 gets /v2
    appended, i.e. `<path>/v2`, which no proxy-cache project serves)."""
    host, path = split_prefix(mirror.prefix_for(upstream))
    if not path:
        return f"https://{host}", False
    return f"https://{host}/v2/{path}", True


def hosts_toml(mirror: ImageMirror, upstream: str, ca_path: Optional[str]) -> str:
    """containerd's hosts.toml for `upstream`: the mirror first, for pull and resolve (a tag
    is resolved there too, so a site without upstream access works); no `server`, so the
    upstream registry stays the last resort (docs/hosts.md "server field")."""
    url, override = mirror_url(mirror, upstream)
    lines = [f"# Written by gpu-cluster: pulls from {upstream} through the image mirror "
             "(images.mirror).",
             f"[host.{_quote(url)}]",
             '  capabilities = ["pull", "resolve"]']
    if override:
        lines.append("  override_path = true")
    if ca_path:
        lines.append(f"  ca = {_quote(ca_path)}")
    return "\n".join(lines) + "\n"


def cri_dropin(mirror: ImageMirror, upstreams: Sequence[str], config_path: str) -> str:
    """A containerd 2 (config v3) drop-in: the CRI image service reads hosts.toml files from
    `config_path`; a login, when configured, per mirror host through
    `registry.configs.<host>.auth` (docs/cri/registry.md "Configure Registry Credentials":
    deprecated but the way hosts.toml still lacks, docs/hosts.md "CRI")."""
    section = '[plugins."io.containerd.cri.v1.images".registry]'
    lines = ["# Written by gpu-cluster: the image mirror (images.mirror) for every registry.",
             "version = 3", "", section, f"  config_path = {_quote(config_path)}"]
    if mirror.username:
        for host in mirror.mirror_hosts(list(upstreams)):
            lines += ["", f'[plugins."io.containerd.cri.v1.images".registry.configs.'
                          f'{_quote(host)}.auth]',
                      f"  username = {_quote(mirror.username)}",
                      f'  password = "{PASSWORD_MARK}"']
    return "\n".join(lines) + "\n"


def containerd_files(mirror: ImageMirror, upstreams: Sequence[str], dropin_path: str,
                     hosts_dir: str, ca_path: str) -> list[RegistryFile]:
    """The drop-in, the CA and one hosts.toml per upstream registry (hosts_dir/<ns>/)."""
    files = [RegistryFile(dropin_path, cri_dropin(mirror, upstreams, hosts_dir),
                          "0600" if mirror.username else "0644")]
    if mirror.ca:
        files.append(RegistryFile(ca_path, mirror.ca.strip() + "\n"))
    files += [RegistryFile(f"{hosts_dir}/{host_directory(upstream)}/hosts.toml",
                           hosts_toml(mirror, upstream, ca_path if mirror.ca else None))
              for upstream in upstreams]
    return files


def registries_yaml(mirror: ImageMirror, upstreams: Sequence[str], ca_path: Optional[str]) -> str:
    """RKE2's registries.yaml: per upstream the mirror's host as endpoint and, for a
    prefix with a path, a rewrite putting the path before the repository (`rewrite`, the
    docs' "Rewrites"); per mirror host its login and CA (`configs`)."""
    lines = ["# Written by gpu-cluster: the image mirror (images.mirror) for every registry.",
             "mirrors:"]
    for upstream in upstreams:
        host, path = split_prefix(mirror.prefix_for(upstream))
        lines += [f"  {_quote(upstream)}:", "    endpoint:", f"      - {_quote('https://' + host)}"]
        if path:
            lines += ["    rewrite:", f"      {_quote('^(.*)$')}: {_quote(path + '/$1')}"]
    hosts = mirror.mirror_hosts(list(upstreams))
    if mirror.username or ca_path:
        lines.append("configs:")
        for host in hosts:
            lines.append(f"  {_quote(host)}:")
            if mirror.username:
                lines += ["    auth:", f"      username: {_quote(mirror.username)}",
                          f'      password: "{PASSWORD_MARK}"']
            if ca_path:
                lines += ["    tls:", f"      ca_file: {_quote(ca_path)}"]
    return "\n".join(lines) + "\n"


def rke2_files(mirror: ImageMirror, upstreams: Sequence[str], path: str,
               ca_path: str) -> list[RegistryFile]:
    files = [RegistryFile(path, registries_yaml(mirror, upstreams, ca_path if mirror.ca else None),
                          "0600")]
    if mirror.ca:
        files.append(RegistryFile(ca_path, mirror.ca.strip() + "\n"))
    return files
