"""Every upstream artifact version the program installs, pinned in one place.

Stack config may override these under `gpu-cluster:versions`; the defaults below are
what the project is tested with. Python dependencies are pinned in requirements*.txt.
"""

K0S = "v1.36.3+k0s.2"
# NVIDIA's production driver branch, installed from Ubuntu's *-server packages.
NVIDIA_DRIVER_BRANCH = "580"
# apt version of nvidia-container-toolkit and its libraries.
NVIDIA_CONTAINER_TOOLKIT = "1.19.1-1"

# Operating systems the bootstrap scripts support (checked by preflight.sh).
SUPPORTED_UBUNTU_RELEASES = ("22.04", "24.04")
