"""cluster-autoscaler (kubernetes/autoscaler cluster-autoscaler-1.36.1, its chart 9.59.0 from
vendor/) on the AWS layouts' pools: it grows a pool's auto scaling group when pods wait for what a
pool's node would give them, and shrinks it when a node has stayed unneeded for
`autoscaling.scaleDownUnneededTime`. It finds the groups by their tags
(`k8s.io/cluster-autoscaler/enabled` and `k8s.io/cluster-autoscaler/<cluster>`), takes
Kueue's ProvisioningRequests (autoscaling.x-k8s.io, the CRD of the release tag), and never
takes a node that runs a Job's or an MPIJob's pods (NOT_SAFE_TO_EVICT_POLICY below). The
composition installs it where config/autoscaling.py `autoscales`: wherever there are pools,
whose nodes carry AWS provider IDs (which it knows nodes by).

Who can do what with its identities:
- Its AWS identity is the instance role of the controller it runs on: the chart's pod has the
  host's network, the one way to the role, since the controllers' metadata service answers
  one hop only (components/aws/control_plane_host.py `http_put_response_hop_limit=1`; the
  EFS CSI driver's controller does the same on the pools, components/addons/efs_csi.py
  `hostNetwork`). That role alone carries the policy of
  components/aws/autoscaler_policy.py: describe the account's groups, instance types and
  launch templates; set the size of, and terminate instances in, the groups tagged
  `k8s.io/cluster-autoscaler/<cluster>` only, which the pools' roles do not get. A compromised
  pool node has its own role and cannot reach the controllers' (another instance's metadata
  service); it cannot draw the pod to itself either: the node selector is the distribution's
  controller label (Distribution.controller_node_labels: RKE2's
  `node-role.kubernetes.io/control-plane`, which RKE2 sets on its servers; on k0s one under
  node-restriction.kubernetes.io/, which install-controller sets), which NodeRestriction
  keeps a kubelet from setting (kubernetes plugin/pkg/admission/noderestriction). So it
  can at most mark itself unready or idle, and so have its own instance removed, or misreport
  its own capacity, which misleads the scheduler as much as CA. CA's metrics port on the
  controller (:8085) is open to no one outside it (the controllers' security group).
- Its ServiceAccount (kube-system, the chart's ClusterRole, templates/clusterrole.yaml at the
  chart tag): reads pods, nodes and the workloads cluster-wide, updates nodes (its taints),
  evicts pods, patches Jobs, writes PodTemplates and ProvisioningRequests with their status
  (what it provisions for Kueue). The token is mounted into its
  one pod, on a controller; a team user has no access to kube-system and cannot mount it, nor
  exec into the pod. What a team user can do is ask for nodes: a pending pod within their
  quota (ResourceQuota, Kueue's ClusterQueue) that fits a pool makes it grow, up to the pool's
  maximum; and keep nodes: a pod of theirs annotated
  `cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`, or running under a Job, holds its
  node until it ends, as intended for long jobs (the cost is the quota's to bound)."""

from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.common import kube
from config import versions
from config.autoscaling import AutoscalingSettings
from config.image_pins import chart_tag

# CA's default namespace (flags.go `namespace`), exempt from the cluster's Pod Security
# default (components/common/pod_security.py): the pod has the host's network.
NAMESPACE = "kube-system"
# The chart's objects' name (values.yaml fullnameOverride): also the lease the chart's RBAC
# names (templates/clusterrole.yaml, `leases` resourceNames cluster-autoscaler).
RELEASE = "cluster-autoscaler"
SERVICE_ACCOUNT = RELEASE
# The taints a controller that runs a kubelet may carry: RKE2's server-only one
# (components/distributions/rke2.py SERVER_ONLY_TAINT) and the control-plane taint k0s's
# --enable-worker sets without --no-taints (components/distributions/k0s.py).
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
TOLERATIONS = ({"key": "CriticalAddonsOnly", "operator": "Exists"},
               {"key": CONTROL_PLANE_LABEL, "operator": "Exists", "effect": "NoSchedule"})
# Expander: least-waste (flags.go `expander`, its default said outright): of the pools that
# would fit the pending pods, the one left with the least idle CPU, then memory
# (expander/waste/waste.go, which counts no GPUs); a GPU instance's CPU and memory grow with
# its GPUs, so it picks the smallest instance type that fits.
EXPANDER = "least-waste"
# The annotation the drainability rules read (utils/drain/drain.go PodSafeToEvictKey).
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
# Kueue's ProvisioningRequest admission check: Kueue makes the requests, CA provisions them
# (flags.go `enable-provisioning-requests`); the classes it serves, as the CRD's
# provisioningClassName describes them (apis/config/crd/
# autoscaling.x-k8s.io_provisioningrequests.yaml:118-122).
PROVISIONING_CLASSES = ("check-capacity.autoscaling.x-k8s.io",
                        "best-effort-atomic-scale-up.autoscaling.x-k8s.io")


def arguments(autoscaling: AutoscalingSettings) -> dict:
    """CA's flags beside those the chart writes (--cloud-provider, --namespace,
    --node-group-auto-discovery), as the chart's extraArgs: flag -> value. Every one is
    registered in cluster-autoscaler/config/flags/flags.go at the tag
    (tests/upstream/test_cluster_autoscaler.py reads it)."""
    return {
        "expander": EXPANDER,
        # Each pool is one group across the zones' subnets with its own pool label
        # (gpu-cluster/pool), so no two groups are "similar" (labels must match,
        # processors/nodegroupset/compare_nodegroups.go): nothing to balance; AWS balances a
        # group's zones itself (AZRebalance).
        "balance-similar-node-groups": "false",
        "scale-down-unneeded-time": autoscaling.scale_down_unneeded_time,
        # What keeps a node running jobs (simulator/drainability/rules/rules.go Default):
        # a pod whose controller is not a ReplicationController, Job, ReplicaSet or
        # StatefulSet (an MPIJob's workers) blocks its node (replicated/rule.go); a pod with
        # local storage (emptyDir, hostPath) blocks it; kube-system pods without a
        # PodDisruptionBudget block it. All three are CA's defaults, said outright. A Job's
        # pods are "replicated" there and would be evicted: NOT_SAFE_TO_EVICT_POLICY.
        "skip-nodes-with-custom-controller-pods": "true",
        "skip-nodes-with-local-storage": "true",
        "skip-nodes-with-system-pods": "true",
        "enable-provisioning-requests": "true",
    }


# The chart's own extraArgs (values.yaml: logtostderr true, stderrthreshold info, v 4) stay:
# klog's flags, which main.go registers with klog.InitFlags(nil) (main.go:201 at the tag; klog
# v2.140.0 klog.go:436-452). A key cannot be taken out of them through the provider (Helm
# drops a key whose value is null, but Pulumi sends no nulls).


def chart_values(cluster_name: str, region: str, autoscaling: AutoscalingSettings,
                 node_selector: Mapping[str, str]) -> dict:
    """The chart's values (values.yaml at cluster-autoscaler-chart-9.59.0) the program sets;
    everything else is upstream's default."""
    return {
        "fullnameOverride": RELEASE,
        "cloudProvider": "aws",
        "awsRegion": region,
        # The chart's autoDiscovery.tags are config/pool_tags.py's ENABLED_TAG and
        # cluster_tag(clusterName).
        "autoDiscovery": {"clusterName": cluster_name},
        "image": {"repository": versions.CLUSTER_AUTOSCALER_IMAGE_REPOSITORY,
                  "tag": chart_tag(versions.CLUSTER_AUTOSCALER_IMAGE,
                                   versions.CLUSTER_AUTOSCALER_IMAGE_REPOSITORY),
                  "pullPolicy": "IfNotPresent"},
        "extraArgs": arguments(autoscaling),
        # The instance's role through IMDS, whose hop limit of 1 keeps it from pods on the
        # pod network (the EFS CSI controller's way, efs_csi.py). Its metrics and health
        # port (flags.go `address`, :8085) is then the controller's; the controllers'
        # security group admits no one to it (components/aws/controller_groups.py
        # ingress_rules: the API, SSH, the distribution's ports).
        "hostNetwork": True,
        "nodeSelector": dict(node_selector),
        "tolerations": list(TOLERATIONS),
        # Nothing scrapes it through a Service.
        "service": {"create": False},
        # The image runs as distroless's nonroot user (cluster-autoscaler/Dockerfile,
        # gcr.io/distroless/static:nonroot, uid 65532).
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containerSecurityContext": {"allowPrivilegeEscalation": False,
                                     "readOnlyRootFilesystem": True,
                                     "capabilities": {"drop": ["ALL"]}},
        "resources": {"requests": {"cpu": "100m", "memory": "300Mi"},
                      "limits": {"memory": "1Gi"}},
    }


NOT_SAFE_TO_EVICT_POLICY = "gpu-cluster-jobs-keep-their-nodes"
# A pod a batch Job or an MPIJob controls: mpi-operator v0.8.0 makes each worker pod with the
# MPIJob as its controller and the launcher a batch Job (pkg/controller/mpi_job_controller.go
# newWorker :1521, newLauncherJob :1528-1537, metav1.NewControllerRef: controller true);
# Kubeflow Trainer's JobSets run Jobs too.
JOB_POD_CONDITION = (
    "has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r, "
    "has(r.controller) && r.controller == true && ("
    "(r.apiVersion.startsWith('batch/') && r.kind == 'Job') || "
    "(r.apiVersion.startsWith('kubeflow.org/') && r.kind == 'MPIJob')))")


def not_safe_to_evict_policy() -> list[dict]:
    """A MutatingAdmissionPolicy (admissionregistration.k8s.io/v1, GA in Kubernetes 1.36, KEP
    3962) that marks every new pod of a Job or an MPIJob
    `cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`, and its binding. CA's rule
    NotSafeToEvict then blocks the pod's node (notsafetoevict/rule.go, a blocking check of
    rules.go Default); without it a Job's pod is "replicated" (replicated/rule.go
    replicatedKind has Job) and its node is drained and removed once it looks unneeded.
    The value is set over whatever the pod asked for ("true" would make it evictable,
    safetoevict/rule.go). Refused pod creations if the policy cannot run (failurePolicy Fail):
    a job that could run there could also be taken."""
    return [{
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": NOT_SAFE_TO_EVICT_POLICY},
        "spec": {
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                "resources": ["pods"]}]},
            "matchConditions": [{"name": "controlled-by-a-job",
                                 "expression": JOB_POD_CONDITION}],
            "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {
                "expression": "Object{metadata: Object.metadata{annotations: "
                              f"{{\"{SAFE_TO_EVICT}\": \"false\"}}}}}}"}}],
        },
    }, {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": NOT_SAFE_TO_EVICT_POLICY},
        "spec": {"policyName": NOT_SAFE_TO_EVICT_POLICY},
    }]


@dataclass(frozen=True, kw_only=True)
class ClusterAutoscalerArgs:
    # The add-ons' provider: registered once every node is ready.
    provider: k8s.Provider
    cluster_name: str
    region: str
    autoscaling: AutoscalingSettings
    # The distribution's labels of a controller's node (Distribution.controller_node_labels).
    node_selector: Mapping[str, str]


class ClusterAutoscaler(pulumi.ComponentResource):
    # What a ProvisioningRequest's user (Kueue's admission check) waits for: the CRD.
    provisioning_requests: pulumi.Resource

    def __init__(self, name: str, args: ClusterAutoscalerArgs,
                 opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:addons:ClusterAutoscaler", name, None, opts)
        opts = kube.k8s_provider_opts(args.provider, self)
        self.provisioning_requests = k8s.yaml.v2.ConfigFile(
            f"{name}-provisioning-request-crd", file=versions.PROVISIONING_REQUEST_CRD,
            opts=opts)
        # Before CA may take any node: the policy that keeps the jobs' nodes. pulumi-kubernetes
        # 4.34 has no class for admissionregistration.k8s.io/v1 MutatingAdmissionPolicy (its
        # SDK stops at v1beta1); CustomResource registers any kind by apiVersion and kind.
        policy: list = []
        for manifest in not_safe_to_evict_policy():
            policy.append(k8s.apiextensions.CustomResource(
                f"{manifest['kind'].lower()}-{manifest['metadata']['name']}",
                api_version=manifest["apiVersion"], kind=manifest["kind"],
                metadata=manifest["metadata"], spec=manifest["spec"],
                opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
                    depends_on=list(policy)))))
        k8s.helm.v4.Chart(
            f"{name}-chart", chart=versions.CLUSTER_AUTOSCALER_CHART, namespace=NAMESPACE,
            values=chart_values(args.cluster_name, args.region, args.autoscaling,
                                args.node_selector),
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
                depends_on=[self.provisioning_requests, *policy])))
        self.register_outputs({"version": versions.CLUSTER_AUTOSCALER})
