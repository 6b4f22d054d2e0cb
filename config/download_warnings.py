"""The preview's warnings about where hosts download from (config/warnings.py prints them): a
stack that sets some of the site's own places but not the others still reaches the
upstream ones for what those others cover."""

from typing import Optional

from config import versions
from config.model import PackageSettings, StackConfig


def download_warnings(settings: StackConfig) -> list[str]:
    warnings = []
    toolkit_hosts = [host.name for host in settings.hosts
                     if host.gpus and settings.nvidia.for_host(host)[1]]
    if settings.packages.apt_mirror and not settings.nvidia.apt_mirror and toolkit_hosts:
        warnings.append(
            "gpu-cluster:packages.aptMirror covers Ubuntu's archive only: install-nvidia on "
            f"{', '.join(toolkit_hosts)} still reads NVIDIA's container toolkit repository "
            "from nvidia.github.io; set gpu-cluster:nvidia.aptMirror to a mirror of it")
    bundle = bool(settings.versions.airgap_bundle_sha256)
    distribution = settings.kubernetes.distribution
    site_places = [key for key, value in (("kubernetes.releaseUrl", settings.kubernetes.release_url),
                                          ("packages.aptMirror", settings.packages.apt_mirror))
                   if value]
    if site_places and not bundle and settings.image_mirror is None:
        warnings.append(
            f"gpu-cluster:{' and gpu-cluster:'.join(site_places)} set, but nodes still pull "
            f"{distribution}'s own images and the add-ons' from their public registries: set "
            "gpu-cluster:images.mirror, or gpu-cluster:versions.airgapBundleSha256 for the "
            "release's airgap image bundle")
    if bundle and settings.image_mirror is None:
        warnings.append(
            f"gpu-cluster:versions.airgapBundleSha256 preloads {distribution}'s own images "
            "only: the add-ons' (device plugin, DCGM exporter, monitoring, storage, Kueue, "
            "Kubeflow) and users' pods still pull from their public registries; set "
            "gpu-cluster:images.mirror for them")
    warnings.append(epel_warning(settings.packages))
    return [warning for warning in warnings if warning]


def epel_warning(packages: PackageSettings) -> Optional[str]:
    """packages.epel adds a repository neither Red Hat nor the rebuilds publish, and the key
    it trusts, to RHEL 9 family hosts, and enables CRB there (configure-dnf.sh)."""
    if not packages.epel:
        return None
    source = packages.epel_mirror or "Fedora's mirror list (mirrors.fedoraproject.org)"
    return ("gpu-cluster:packages.epel is true: configure-dnf adds EPEL 9, the Fedora "
            "community's repository (not Red Hat's, Rocky Linux's or AlmaLinux's), to every "
            f"RHEL 9 family host from {source}, trusting its key "
            f"{versions.EPEL_9_KEY_FINGERPRINT} for every package it signs, and enables "
            "CRB (CodeReady Linux Builder) there; Ubuntu hosts are left alone")
