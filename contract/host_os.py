"""The operating systems hosts run, as os-release(5) names them: preflight accepts these and
no other (components/hosts/bootstrap.py passes them as its SUPPORTED_OS input), and
`gpu-cluster init` leaves out a host on any other. Here, not in config/, because the command
reads it too (tests/contract/test_contract.py: cli/ imports none of the program). Standard
library only."""

# (ID, VERSION_ID); a version also accepts its point releases (rhel 9: 9.4).
UBUNTU = (("ubuntu", "22.04"), ("ubuntu", "24.04"))
EL9 = (("rocky", "9"), ("almalinux", "9"), ("rhel", "9"))
# The steps set up both families, each its own way (components/scripts/os/lib.sh os_family).
SUPPORTED_OS = UBUNTU + EL9
# How messages name each ID (os/lib.sh os_name names them alike: tests/cli/test_supported_os.py).
OS_NAMES = {"ubuntu": "Ubuntu", "rocky": "Rocky Linux", "almalinux": "AlmaLinux", "rhel": "RHEL"}


def os_supported(os_id: str, version: str) -> bool:
    """Whether preflight accepts the host whose os-release has this ID and VERSION_ID."""
    return any(os_id == wanted and (version == release or version.startswith(release + "."))
               for wanted, release in SUPPORTED_OS)


def supported_os_names() -> str:
    """SUPPORTED_OS as messages name it: "Ubuntu 22.04, Ubuntu 24.04"."""
    return ", ".join(f"{OS_NAMES.get(os_id, os_id)} {release}"
                     for os_id, release in SUPPORTED_OS)


def supported_os_input() -> str:
    """preflight's SUPPORTED_OS input: ID:VERSION words."""
    return " ".join(f"{os_id}:{release}" for os_id, release in SUPPORTED_OS)
