"""Why the AWS cloud controller manager never deletes or taints an on-prem node of the
hybrid layout, held to the pinned sources (cloud-provider-aws v1.35.2, k8s.io/cloud-provider
v0.35.0):

- Its node lifecycle controller looks only at nodes whose Ready is not True; through
  InstancesV2 (which AWS implements, pkg/providers/v1/aws.go:720-722) it asks
  InstanceExists and, on an error, logs and goes on to the next node
  (controllers/nodelifecycle/node_lifecycle_controller.go:136-158, 252-254): it deletes a
  node only on (false, nil), and taints one stopped only after (true, nil) (:181-196).
- InstanceExists takes node.spec.providerID, or without one the instance named like the
  node (pkg/providers/v1/instances_v2.go:35-57, aws.go:973-988); a providerID AWS cannot
  map to an instance id is an error (instances.go:61-91, aws.go:890-894).
- An on-prem node's providerID, where it has one, is the program's gpu-cluster://<digest>
  (config/storage.py efs_provider_id): an error. Without one, the lookup by name keeps only
  instances with the kubernetes.io/cluster/<id> tag (aws.go:3491-3508; the id is given,
  cloud_config), which the program puts on none: InstanceNotFound, an error too.
- Its cloud node controller takes up only nodes tainted node.cloudprovider.kubernetes.io/
  uninitialized (controllers/node/node_controller.go:426-427), which only a kubelet with
  an external cloud provider registers with; on-prem kubelets keep the default
  (tests/stacks/test_cloud_controller.py)."""

import re
from urllib.parse import urlsplit

import pytest

from components.aws import cloud_controller
from components.aws.tags import CLUSTER_TAG, default_tags, propagated_tags
from config.storage import efs_provider_id

# instances.go:39.
AWS_INSTANCE = re.compile(r"^i-[^/]*$")


def map_to_aws_instance_id(provider_id: str) -> str:
    """KubernetesInstanceID.MapToAWSInstanceID (instances.go:61-91; the Fargate variant's
    `fargate-` ids, variant.IsVariantNode, aside: no node here is one)."""
    text = provider_id if provider_id.startswith("aws://") else "aws:///" + provider_id
    url = urlsplit(text)
    if url.scheme != "aws":
        raise ValueError(f"Invalid scheme for AWS instance ({provider_id})")
    tokens = url.path.strip("/").split("/")
    found = tokens[-1] if tokens else ""
    if not found or not AWS_INSTANCE.match(found):
        raise ValueError(f"Invalid format for AWS instance ({provider_id})")
    return found


@pytest.mark.parametrize("host", ["gpu000", "moscow", "i-0123456789abcdef0", "a" * 63])
def test_an_on_prem_provider_id_is_no_aws_instance(host):
    with pytest.raises(ValueError):
        map_to_aws_instance_id(efs_provider_id("prod", host))


def test_an_ec2_nodes_provider_id_names_its_instance():
    # As ssm-parameter.py provider-id prints it (tests/components/test_ssm_parameter.py).
    assert map_to_aws_instance_id("aws:///us-west-2b/i-0123456789abcdef0") == "i-0123456789abcdef0"


def test_no_instance_is_found_by_a_nodes_name():
    """The cluster id is given, and no instance carries the tag the lookup by name keeps."""
    assert cloud_controller.cloud_config("prod") == "[Global]\nKubernetesClusterID = prod\n"
    tags = propagated_tags(default_tags("prod", {"team": "ml"}), {"Name": "prod-gpu"})
    assert CLUSTER_TAG in tags
    assert not [key for key in tags if key.startswith("kubernetes.io/cluster/")
                or key == "KubernetesCluster"]


# What a kubelet may label its own Node with under kubernetes.io and k8s.io, where
# NodeRestriction (enabled on RKE2, components/distributions/rke2.py
# DEFAULT_ADMISSION_PLUGINS) refuses the rest: k8s.io/kubelet pkg/apis/well_known_labels.go
# kubeletLabels and kubeletLabelNamespaces.
KUBELET_LABELS = {"kubernetes.io/hostname", "topology.kubernetes.io/zone",
                  "topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone",
                  "failure-domain.beta.kubernetes.io/region", "kubernetes.io/arch",
                  "kubernetes.io/os", "node.kubernetes.io/instance-type",
                  "beta.kubernetes.io/instance-type", "beta.kubernetes.io/arch",
                  "beta.kubernetes.io/os"}
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")


@pytest.mark.parametrize("distribution", ["rke2", "k0s"])
def test_a_pool_node_cannot_label_itself_into_running_it(distribution):
    """Its pods (and their token, which may delete every node) run where the distribution's
    controller labels are; a compromised pool node's kubelet may not set them, nor have k0s
    set them for it: k0s's node-role controller gives any node whose kubelet set
    node.k0sproject.io/role=X the label node-role.kubernetes.io/X (v1.36.3+k0s.2
    pkg/component/controller/noderole.go:82-101), so on k0s no node-role.kubernetes.io/ key."""
    from components.distributions import distribution_for, distribution_settings
    from components.distributions.k0s_api import DEFAULT_ADMISSION_PLUGINS as K0S_PLUGINS
    from components.distributions.rke2 import DEFAULT_ADMISSION_PLUGINS
    from tests.builders import cloud_config
    from tests.config.loading import loads

    assert "NodeRestriction" in DEFAULT_ADMISSION_PLUGINS and "NodeRestriction" in K0S_PLUGINS
    values = cloud_config()
    values["kubernetes"] = {"distribution": distribution}
    labels = distribution_for(distribution_settings(loads(values))).controller_node_labels
    selector = cloud_controller.chart_values(labels)["nodeSelector"]
    assert selector
    for key in selector:
        if distribution == "k0s":
            assert not key.startswith("node-role.kubernetes.io/"), key
        prefix = key.split("/", 1)[0]
        assert prefix.endswith(("kubernetes.io", "k8s.io")), key
        assert key not in KUBELET_LABELS
        assert not any(prefix == ns or prefix.endswith("." + ns)
                       for ns in KUBELET_LABEL_NAMESPACES), key
