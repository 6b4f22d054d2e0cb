"""Kueue, job queueing for the teams (access.queues): its pinned release's Helm chart with a
manager configuration of our own. The teams' queues themselves are access's
(components/access/queues.py): they follow the teams' quotas."""

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.common import kube
from config import versions
from config.image_pins import chart_tag

NAMESPACE = "kueue-system"
# What a job carries to be queued in its namespace's LocalQueue of that name
# (kueue v0.19.2 pkg/controller/constants/constants.go QueueLabel).
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
# The job kinds Kueue manages: batch Jobs and the MPI operator's MPIJobs, what researchers
# submit here. Upstream's default list adds pods, Deployments, StatefulSets, Ray, JobSet and
# more; a framework left out keeps a no-op webhook (v0.19.2 pkg/controller/jobframework/
# setup.go:109). One whose CRD is absent (mpi.operator: false) is deferred, not an error
# (setup.go:96, "No matching API in the server for job framework, deferring ...").
FRAMEWORKS = ("batch/job", "kubeflow.org/mpijob")
# Kueue sets up its ProvisioningRequest admission check controller only when it starts and
# the API serves autoscaling.x-k8s.io/v1 ProvisioningRequests (v0.19.2 cmd/kueue/main.go:
# 513-526, "Skipping provisioning controller setup"); no feature gate (the controller is GA
# since v0.14: site/content/en/docs/concepts/admission_check/provisioning_request.md). This
# annotation on the manager's pods changes when a team's queue first uses the check, so the
# manager restarts and sets the controller up (cluster-autoscaler's CRD installed by then).
PROVISIONING_ANNOTATION = "gpu-cluster/provisioning-requests"


def manager_configuration() -> dict:
    """Kueue's Configuration (config.kueue.x-k8s.io/v1beta2), replacing the chart's
    `managerConfig.controllerManagerConfigYaml`: upstream's defaults (charts/kueue/values.yaml
    at v0.19.2, which tests/upstream compares) with these changes:
    - integrations: FRAMEWORKS only;
    - manageJobsWithoutQueueName false (upstream's default, said outright): a job without a
      queue name runs as before, under its namespace's ResourceQuota only, so nothing the
      cluster already runs (the acceptance checks, Kubeflow's own jobs) starts waiting;
    - quotaCheckStrategy IgnoreUndeclared (beta and on in 0.19, pkg/features/kube_features.go):
      a resource a team's quota leaves unset is not counted, as its ResourceQuota does not
      count it, instead of making every job that requests it inadmissible."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "controller": {"groupKindConcurrency": {
            "Job.batch": 5, "Pod": 5, "Workload.kueue.x-k8s.io": 10,
            "LocalQueue.kueue.x-k8s.io": 5, "ClusterQueue.kueue.x-k8s.io": 5,
            "ResourceFlavor.kueue.x-k8s.io": 1}},
        "clientConnection": {"qps": 300, "burst": 500},
        "manageJobsWithoutQueueName": False,
        "integrations": {"frameworks": list(FRAMEWORKS)},
        "resources": {"quotaCheckStrategy": "IgnoreUndeclared"},
    }


def chart_values(provisioning: bool = False) -> dict:
    """The release's image (the chart in the tag names a staging one) and our configuration;
    with `provisioning`, PROVISIONING_ANNOTATION on the manager's pods."""
    manager: dict = {"image": {
        "repository": versions.KUEUE_IMAGE_REPOSITORY,
        "tag": chart_tag(versions.KUEUE_IMAGE, versions.KUEUE_IMAGE_REPOSITORY),
        "pullPolicy": "IfNotPresent"}}
    if provisioning:
        manager["podAnnotations"] = {PROVISIONING_ANNOTATION: "enabled"}
    return {
        "controllerManager": {"manager": manager},
        "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(
            manager_configuration(), sort_keys=False)},
    }


@dataclass(frozen=True, kw_only=True)
class KueueArgs:
    # The add-ons' provider: registered once every node is ready.
    provider: k8s.Provider
    # Whether a team's queue waits for cluster-autoscaler's nodes (components/access/
    # queues.py uses_provisioning).
    provisioning: bool = False


class Kueue(pulumi.ComponentResource):
    # What the queues wait for: the chart (its CRDs, webhooks and a ready controller).
    installed: list

    def __init__(self, name: str, args: KueueArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:addons:Kueue", name, None, opts)
        opts = kube.k8s_provider_opts(args.provider, self)
        namespace = kube.apply({"apiVersion": "v1", "kind": "Namespace",
                                "metadata": {"name": NAMESPACE}}, opts)
        chart = k8s.helm.v4.Chart(
            f"{name}-chart",
            chart=versions.KUEUE_CHART,
            namespace=NAMESPACE,
            values=chart_values(args.provisioning),
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[namespace])),
        )
        self.installed = [chart]
        self.register_outputs({"version": versions.KUEUE})
