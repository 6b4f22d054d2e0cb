"""What the program leaves to GPU hosts themselves (nvidia.installDriver/installToolkit and
the hosts' own answers): the preview's warnings about it."""

from collections.abc import Sequence

from config.model import Host, NvidiaSettings


def runtime_warnings(hosts: Sequence[Host], nvidia: NvidiaSettings) -> list[str]:
    """GPU hosts that get no container toolkit and no containerd `nvidia` runtime from the
    program: the device plugin's and the DCGM exporter's pods (runtimeClassName: nvidia)
    start there only if the host has both. Named by the key that changes it."""
    by_key: dict[str, list[str]] = {}
    for index, host in enumerate(hosts):
        if host.gpus and not nvidia.for_host(host)[1]:
            key = (f"hosts[{index}] ({host.name}).installToolkit"
                   if host.install_toolkit is not None else "nvidia.installToolkit")
            by_key.setdefault(key, []).append(host.name)
    return [f"gpu-cluster:{key} is false: the program installs no NVIDIA Container Toolkit and "
            f"no containerd `nvidia` runtime on {', '.join(names)}; the device plugin's and the "
            "DCGM exporter's pods (runtimeClassName: nvidia) start there only if the host has "
            "both; set it to true unless it does"
            for key, names in by_key.items()]
