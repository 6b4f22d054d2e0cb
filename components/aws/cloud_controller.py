"""The AWS cloud controller manager (kubernetes/cloud-provider-aws, config/versions.py
CLOUD_PROVIDER_AWS), its chart vendored, on the controllers of the AWS layouts where they
are nodes (components/distributions/__init__.py runs_aws_cloud_controller). It runs two
controllers and no others (CONTROLLERS): the cloud node controller gives each EC2 node,
which registers tainted node.cloudprovider.kubernetes.io/uninitialized, its providerID,
zone, region and instance-type labels and addresses, then lifts the taint; the node
lifecycle controller deletes the Node of an instance EC2 no longer has (a pool's instance
the group let go) and taints the Node of a stopped one.

A node given --node-ip (a controller: its fixed private address, config/cloud.py
controller_addresses) must have that address among its instance's, or the node controller
leaves it uninitialised (k8s.io/cloud-provider v0.35.0 controllers/node/
node_controller.go:740, GetNodeAddressesFromNodeIP): an EC2 instance's private address is.

It is installed through the nodes' provider (`<stack>-kubernetes-nodes`, ARCHITECTURE.md),
registered once the control plane is installed, not through the add-ons' provider, which
waits for every node: no node waits for it to become Ready (the taint keeps pods off, not
Ready away), and it needs nothing but the API, IMDS and EC2, so nothing deadlocks.

Who can do what with its identity:
- In Kubernetes it is the chart's ServiceAccount kube-system/cloud-controller-manager,
  bound to the chart's ClusterRole system:cloud-controller-manager: every verb on nodes,
  services and their status, events, leases, tokenreviews: it may delete every node.
  Only cluster admins create pods or tokens in kube-system (team users are bound to their
  own namespaces, components/access/), so no team user can mount or request its token.
  Its pods run on the controllers only (nodeSelector on the distribution's controller
  label), never on a pool node, and a pool node's kubelet may not give its own Node that
  label (NodeRestriction allows it kubelet.kubernetes.io/, node.kubernetes.io/ and a few
  well-known labels only; on k0s the label is one under node-restriction.kubernetes.io/
  that install-controller sets, since k0s itself turns a label any kubelet may set into
  node-role.kubernetes.io/ ones): a compromised pool node cannot read its token
  (tests/components/test_cloud_controller.py).
- In AWS it is the controllers' instance role, which it reaches through IMDS (hostNetwork:
  the instances' hop limit of 1 keeps pods on the pod network away from IMDS,
  components/aws/control_plane_host.py). The role gets `policy()`: describing instances,
  zones and instance topology, read only; no pool node's role gets it. A user who may
  create a Service of type LoadBalancer gets no load balancer: the service controller is
  not run, and the role may create none.
- Its only port, the controller manager's secure port (10258, delegated authentication
  and authorization through the API), is on the controllers' host network; their
  security groups open no such port (components/aws/control_plane_host.py), so only
  what runs on a controller reaches it.
"""

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.common import kube
from config import versions
from config.image_pins import chart_tag

NAMESPACE = "kube-system"
# The chart's names (vendor/cloud-provider-aws-v1.35.2/charts/aws-cloud-controller-manager/
# values.yaml: nameOverride, serviceAccountName, clusterRoleName).
DAEMONSET = "aws-cloud-controller-manager"
SERVICE_ACCOUNT = "cloud-controller-manager"
CLUSTER_ROLE = "system:cloud-controller-manager"
# The node controllers alone, by their canonical names (k8s.io/cloud-provider v0.35.0
# names/controller_names.go:49-54); `--controllers` takes them (k8s.io/controller-manager
# v0.35.0 options/generic.go). Not the service controller (load balancers for any
# Service of type LoadBalancer) nor the route controller, nor the tagging controller,
# which cloud-provider-aws disables by default (cmd/aws-cloud-controller-manager/main.go:76).
CONTROLLERS = ("cloud-node-controller", "cloud-node-lifecycle-controller")
# Its cloud config, a ConfigMap mounted into the pod.
CLOUD_CONFIG_MAP = "aws-cloud-controller-manager-config"
CLOUD_CONFIG_DIR = "/etc/aws-cloud-controller-manager"
CLOUD_CONFIG_FILE = "cloud.conf"
# The EC2 actions it calls with these controllers, of the control plane policy
# cloud-provider-aws documents (v1.35.2 docs/prerequisites.md:14-87): DescribeInstances
# (the node's instance by id, pkg/providers/v1/aws.go:890-970, and its own at start,
# aws.go:639-660), DescribeAvailabilityZones (the zone-id label, pkg/providers/v1/
# zones.go:112 from instances_v2.go:74-83) and DescribeInstanceTopology (the network
# topology labels of p and trn instances, pkg/providers/v1/topology.go:87-131). None of
# the three supports resource-level permissions or condition keys
# (https://docs.aws.amazon.com/service-authorization/latest/reference/
# list_amazonec2.html), so "*" is their only resource.
EC2_ACTIONS = ("ec2:DescribeAvailabilityZones", "ec2:DescribeInstanceTopology",
               "ec2:DescribeInstances")


def args(cloud_config_path: str = f"{CLOUD_CONFIG_DIR}/{CLOUD_CONFIG_FILE}") -> list[str]:
    """Its command line. Every flag is one the pinned release registers
    (tests/upstream/test_cloud_controller.py holds that against the source)."""
    return ["--v=2", "--cloud-provider=aws", f"--cloud-config={cloud_config_path}",
            f"--controllers={','.join(CONTROLLERS)}"]


def cloud_config(cluster_name: str) -> str:
    """The cloud config (gcfg, pkg/providers/v1/config/config.go:42-70): the cluster's id
    given, so it neither reads a kubernetes.io/cluster/<id> tag from its own instance
    (aws.go:647-660) nor finds an instance by a node's name: that lookup keeps only
    instances with the tag (aws.go:3491-3508), which the program puts on none. Every EC2
    node is found by the providerID its kubelet registered with; an on-prem node by
    nothing (docs/layouts.md, "The AWS cloud controller manager")."""
    return f"[Global]\nKubernetesClusterID = {cluster_name}\n"


def policy() -> str:
    """The controllers' role's grant for it: EC2_ACTIONS, read only."""
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Sid": "CloudControllerDescribesInstances", "Effect": "Allow",
         "Action": list(EC2_ACTIONS), "Resource": "*"}]})


def chart_values(node_selector: Mapping[str, str]) -> dict:
    """The vendored chart's values (its values.yaml): the pinned image by digest, the
    flags, the cloud config mounted, the host's network and the controllers alone."""
    repository = versions.CLOUD_PROVIDER_AWS_IMAGE_REPOSITORY
    return {
        "image": {"repository": repository,
                  "tag": chart_tag(versions.CLOUD_PROVIDER_AWS_IMAGE, repository)},
        "args": args(),
        # IMDS answers the instance role's credentials only one hop away: the instances'
        # http_put_response_hop_limit is 1 (components/aws/control_plane_host.py), so a
        # pod on the pod network gets no IMDSv2 token. The chart sets hostNetwork only
        # when asked (templates/daemonset.yaml:27-29, `hostNetworking`); dnsPolicy
        # Default (values.yaml) resolves with the host's resolver.
        "hostNetworking": True,
        "nodeSelector": dict(node_selector),
        # Whatever the controllers are tainted with (the distribution's control-plane
        # taint, node.cloudprovider.kubernetes.io/uninitialized until it initialised
        # them): a controller node never runs anything else of the cluster's users.
        "tolerations": [{"operator": "Exists"}],
        "extraVolumes": [{"name": "cloud-config",
                          "configMap": {"name": CLOUD_CONFIG_MAP}}],
        "extraVolumeMounts": [{"name": "cloud-config", "mountPath": CLOUD_CONFIG_DIR,
                               "readOnly": True}],
        "securityContext": {"allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]}},
    }


@dataclass(frozen=True, kw_only=True)
class CloudControllerArgs:
    cluster_name: str
    # The nodes' provider (`<stack>-kubernetes-nodes`).
    provider: k8s.Provider
    # Each controller's instance role (names): where its pods may run.
    controller_roles: Sequence[pulumi.Input[str]]
    # The distribution's labels of a controller's node (Distribution.controller_node_labels).
    node_selector: Mapping[str, str]


class CloudController(pulumi.ComponentResource):
    def __init__(self, name: str, args: CloudControllerArgs,
                 opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:aws:CloudController", name, None, opts)
        for index, role in enumerate(args.controller_roles):
            aws.iam.RolePolicy(f"{name}-controller" + (f"-{index + 1}" if index else ""),
                               role=role, policy=policy(),
                               opts=pulumi.ResourceOptions(parent=self))
        k8s_opts = kube.k8s_provider_opts(args.provider, self)
        config_map = kube.apply({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": CLOUD_CONFIG_MAP, "namespace": NAMESPACE},
            "data": {CLOUD_CONFIG_FILE: cloud_config(args.cluster_name)}}, k8s_opts)
        self.chart = k8s.helm.v4.Chart(
            f"{name}-chart", chart=versions.CLOUD_PROVIDER_AWS_CHART, namespace=NAMESPACE,
            values=chart_values(args.node_selector),
            opts=pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(
                depends_on=[config_map])))
        self.register_outputs({"version": versions.CLOUD_PROVIDER_AWS})
