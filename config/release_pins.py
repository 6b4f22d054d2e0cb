"""`gpu-cluster:versions`: what a stack may set beside the pins of config/versions.py. Today
the sha256 of the distribution's release file for a `kubernetes.version` the project does
not pin: the scripts check the download against it and never against a checksum file of the
same release (that file comes from where the download does)."""

from typing import Annotated, Literal

from pydantic import StringConstraints

from config import versions
from config.model_base import Section
from config.partial import PartialConfig
from config.problems import Problem


# A sha256 as sha256sum prints it: 64 lower-case hex digits, matched whole.
Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
Architecture = Literal[versions.RELEASE_ARCHITECTURES]  # type: ignore[valid-type]

# The file the distribution's scripts download, per architecture (k0s/lib.sh
# k0s_install_binary, rke2/lib.sh rke2_install).
RELEASE_FILES = {"k0s": "k0s-<version>-<arch>", "rke2": "rke2.linux-<arch>.tar.gz"}
# The release's airgap image bundle, per architecture, from the same place (k0s/lib.sh
# k0s_install_airgap_bundle, rke2/lib.sh rke2_install_airgap_bundle).
AIRGAP_BUNDLE_FILES = {"k0s": "k0s-airgap-bundle-<version>-<arch>",
                       "rke2": "rke2-images.linux-<arch>.tar.zst"}


class VersionOverrides(Section):
    # sha256 of RELEASE_FILES[distribution] of kubernetes.version, by architecture; over the
    # pinned ones (config/versions.py RELEASE_SHA256) where both exist.
    release_sha256: dict[Architecture, Sha256] = {}
    """sha256 of the distribution's release file by architecture (`amd64`, `arm64`): required for a
    `kubernetes.version` `config/versions.py` pins none for, and replaces a pinned one; the install
    scripts check the download against it (see [Supply chain](distributions.md#supply-chain))."""
    # sha256 of AIRGAP_BUNDLE_FILES[distribution] of kubernetes.version, by architecture:
    # set, every node downloads the bundle (from kubernetes.releaseUrl, else the release's
    # page) and checks it before install or join. The project pins none: the bundles are
    # hundreds of MB and their sums are not readable offline.
    airgap_bundle_sha256: dict[Architecture, Sha256] = {}
    """sha256 of the release's airgap image bundle by architecture (`amd64`, `arm64`); set, every
    node downloads the bundle, checks it and loads it before install, join and upgrade; the add-ons'
    images need `images.mirror` (see [Image mirror](distributions.md#image-mirror))."""


def release_sha256(distribution: str, version: str, overrides: VersionOverrides) -> dict[str, str]:
    """Architecture -> the sha256 the scripts require of the release file."""
    pinned = versions.RELEASE_SHA256.get(distribution, {}).get(version, {})
    return {**pinned, **overrides.release_sha256}


def release_pin_checks(cfg: PartialConfig) -> list[Problem]:
    """A kubernetes.version without a pinned or configured sha256 is refused."""
    if cfg.kubernetes is None or cfg.versions is None:
        return []
    distribution, version = cfg.kubernetes.distribution, cfg.kubernetes.version
    if release_sha256(distribution, version, cfg.versions):
        return []
    return [Problem("versions.releaseSha256",
                    f"{distribution} {version} has no pinned sha256 (config/versions.py pins "
                    f"{', '.join(sorted(versions.RELEASE_SHA256.get(distribution, {})))}); set "
                    f"the sha256 of {RELEASE_FILES[distribution]} for the architectures of "
                    f"your hosts, e.g. {{\"amd64\": \"<64 hex digits>\"}}, from a source you trust")]
