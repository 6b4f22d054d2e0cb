"""Where the program keeps its SSM parameters on the AWS layouts: one scheme,
/gpu-cluster/<cluster>/..., so each instance role's policy (its own parameters only, see
aws_boot.instance_profile) and users' fetch commands follow from the names here."""


def cluster_prefix(cluster_name: str) -> str:
    return f"/gpu-cluster/{cluster_name}"


def control_plane_secret(cluster_name: str, secret: str) -> str:
    """A secret the control-plane instance reads at boot: ssh-host-key, ca-key, or one of
    the distribution's cluster secrets."""
    return f"{cluster_prefix(cluster_name)}/control-plane/{secret}"


def controller_secret(cluster_name: str, controller: str, secret: str) -> str:
    """A secret a controller after the first reads at boot (its ssh-host-key); the first's
    are control_plane_secret's."""
    return f"{cluster_prefix(cluster_name)}/controllers/{controller}/{secret}"


def pool_join_token(cluster_name: str, pool: str) -> str:
    return f"{cluster_prefix(cluster_name)}/{pool}/join-token"


def boot_statuses(cluster_name: str) -> str:
    """Below it, every instance's boot status: the controller's pool-node watcher deletes
    those of instances that are gone."""
    return f"{cluster_prefix(cluster_name)}/boot-status"


# The image mirror's password, per pool and the controller's (control_plane_secret).
IMAGE_MIRROR_PASSWORD = "image-mirror-password"
# A controller's join token, from the first, for one that joins at boot (controller_secret).
CONTROLLER_JOIN_TOKEN = "controller-token"


def pool_secret(cluster_name: str, pool: str, secret: str) -> str:
    """A secret a pool's instances read at boot (the image mirror's password)."""
    return f"{cluster_prefix(cluster_name)}/{pool}/{secret}"


def boot_status(cluster_name: str, machine: str) -> str:
    """Where the instances of `machine` (the controller or a pool) report their boot, one
    parameter per instance id."""
    return f"{boot_statuses(cluster_name)}/{machine}"


def user_kubeconfig(cluster_name: str, user: str) -> str:
    return f"{cluster_prefix(cluster_name)}/users/{user}/kubeconfig"
