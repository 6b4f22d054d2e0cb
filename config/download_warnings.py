"""The preview's warnings about where hosts download from (config/warnings.py prints them): a
stack that sets some of the site's own places but not the others still reaches the
upstream ones for what those others cover."""

from config.model import StackConfig


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
    return warnings
