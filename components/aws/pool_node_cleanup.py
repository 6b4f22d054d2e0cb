"""How a cloud pool instance leaves the cluster without leaving a NotReady node behind.

When a pool's auto scaling group terminates an instance (scale-in, instance refresh,
health replacement), a termination lifecycle hook keeps it running for a while; the
instance's node-cleanup service sees IMDS report the Terminated target state and deletes
its own Node object. It does so with a credential made here (the kubelet's own may not
delete nodes): a client certificate for a user bound to a ClusterRole that may only get
and delete nodes, as a kubeconfig in an SSM SecureString that only pool roles may read."""

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.common import kube

from components.aws import ssm_paths
from components.aws.boot import secret_parameter
from components.kubernetes.pki import ClusterPki
from components.distributions.base import Distribution
from components.kubernetes.kubeconfig import client_kubeconfig
from components.common.step_text import DataFile, Script
from components.common.shell_text import without_comment_lines

WATCH_TERMINATION = Script("aws/watch-termination.sh")
NODE_CLEANUP_AGENT = DataFile("aws/node-cleanup-agent.sh")
NODE_CLEANUP_USER = "gpu-cluster:node-cleanup"
# Where the boot keeps ssm-parameter.py on the instance (boot/run-boot.sh).
SSM_CLIENT_PATH = "/var/lib/gpu-cluster/boot/ssm-parameter.py"
# How long a terminating instance is held for its cleanup: polling every 5 s, one SSM
# read and one API call need far less; the instance goes on when the hook times out.
HOLD_SECONDS = 120



def node_cleanup_env(cluster_name: str, distribution: Distribution) -> dict[str, str]:
    """The inputs of the watch-termination boot step."""
    return {
        # Installed without its comments: user data has a size limit.
        "NODE_CLEANUP_AGENT": without_comment_lines(NODE_CLEANUP_AGENT.text()),
        "NODE_CLEANUP_KUBECONFIG_PARAMETER": ssm_paths.node_cleanup_kubeconfig(cluster_name),
        "KUBECTL": distribution.kubectl,
        "SSM_CLIENT": SSM_CLIENT_PATH,
    }


def cluster_role() -> list[dict]:
    """What the cleanup credential may do: read and delete nodes, nothing else."""
    name = "gpu-cluster:node-cleanup"
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": name},
         "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "delete"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": name},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": name},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                       "name": NODE_CLEANUP_USER}]},
    ]


@dataclass
class PoolNodeCleanupArgs:
    cluster_name: str
    pki: ClusterPki
    # Where pool instances reach the API (the controller's private address).
    api_endpoint: pulumi.Input[str]
    kubernetes: k8s.Provider


class PoolNodeCleanup(pulumi.ComponentResource):
    parameter: aws.ssm.Parameter

    def __init__(self, name: str, args: PoolNodeCleanupArgs,
                 opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:aws:PoolNodeCleanup", name, None, opts)
        kube.apply_all(cluster_role(), kube.k8s_provider_opts(args.kubernetes, self))
        cert = args.pki.client_certificate("node-cleanup", NODE_CLEANUP_USER)
        kubeconfig = pulumi.Output.all(
            args.api_endpoint, args.pki.ca_cert_pem, cert.cert_pem, cert.private_key_pem,
        ).apply(lambda v: client_kubeconfig(args.cluster_name, v[0], v[1],
                                            "node-cleanup", v[2], v[3]))
        self.parameter = secret_parameter(
            f"{name}-kubeconfig", ssm_paths.node_cleanup_kubeconfig(args.cluster_name), kubeconfig,
            # No tags of its own: the provider's default_tags are all it carries.
            None, pulumi.ResourceOptions(parent=self))
        self.register_outputs({"parameter": self.parameter.name})

    def hold_terminating_instances(self, name: str, group: aws.autoscaling.Group,
                                   opts: pulumi.ResourceOptions) -> aws.autoscaling.LifecycleHook:
        """A group's termination hook: its instances stay up HOLD_SECONDS for the cleanup,
        then terminate whatever happened (CONTINUE)."""
        return aws.autoscaling.LifecycleHook(
            name, autoscaling_group_name=group.name,
            lifecycle_transition="autoscaling:EC2_INSTANCE_TERMINATING",
            heartbeat_timeout=HOLD_SECONDS, default_result="CONTINUE", opts=opts)
