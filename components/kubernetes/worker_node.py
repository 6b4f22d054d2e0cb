"""A host joining the cluster as a worker: join, wait until Ready, keep labels and taints
in sync; on removal, drain and delete the node before resetting the host. From the
controller: cordon and drain it for maintenance, remove the node of a replaced machine."""

from dataclasses import dataclass, field
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from components.kubernetes.control_plane import ControlPlane
from components.distributions.base import Distribution
from components.hosts.bootstrap import PreparedHost
from components.common.remote_step import run_step
from components.common.step_text import Script
from components.kubernetes.upgrade import RolloutPolicy, uncordon_worker, worker_upgrade
from config.hosts import MACHINE_GENERATION_LABEL, Host
from config.node_labels import node_labels

MAINTAIN_NODE = Script("maintenance/maintain-node.sh")
END_MAINTENANCE = Script("maintenance/end-maintenance.sh")
RETIRE_NODE = Script("maintenance/retire-node.sh", extra_libraries=("drain/lib.sh",))
# The same for every distribution, which gives its kubectl and controller file as inputs.
ADMIT_NODE = Script("node/admit-node.sh")
REMOVE_NODE = Script("node/remove-node.sh", extra_libraries=("drain/lib.sh",))


@dataclass(frozen=True, kw_only=True)
class WorkerNodeArgs:
    host: Host
    distribution: Distribution
    prepared: PreparedHost
    control_plane: ControlPlane
    provider: k8s.Provider
    # What must be up before the node can reach the control plane (the VPN tunnel).
    join_after: list = field(default_factory=list)
    # How its node is drained and waited for: an upgrade, maintenance, a replaced machine;
    # admit-node's wait for Ready.
    rollout: RolloutPolicy = RolloutPolicy()
    # (providerID, region) the node's Node carries where a driver that expects EC2 runs
    # on it without EC2 metadata (hybrid with storage.efs.issuerBucket; node_identity_patch).
    provider_identity: Optional[tuple[str, str]] = None


class WorkerNode(pulumi.ComponentResource):
    # The ends of the node's steps: what "this node is ready" waits for, rather than the
    # component, which stands for each of its resources.
    ready: list[pulumi.Resource]

    def __init__(self, name: str, args: WorkerNodeArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:cluster:WorkerNode", name, None, opts)
        host, distribution, control_plane = args.host, args.distribution, args.control_plane

        kubectl = {"NODE_NAME": host.name, "KUBECTL": distribution.kubectl_path}
        if host.runs_control_plane:
            # A controller+worker host registers its node when the controller starts.
            joined = control_plane.installed
        else:
            # Installs the release before the join, upgrades it on a version bump; the
            # join itself carries no version, so a bump never re-runs it.
            installed = worker_upgrade(
                host, distribution, controller=control_plane.ssh, node=args.prepared.ssh,
                rollout=args.rollout, after=[control_plane.installed],
                node_ready=[args.prepared.ready], parent=self)
            ready_to_join = [args.prepared.ready, *args.join_after, installed]
            token = control_plane.join_token_for(host, after=ready_to_join)
            if host.generation:
                # New hardware under the old name: the old machine's node goes first.
                ready_to_join = ready_to_join + [run_step(
                    host,
                    "retire-node",
                    on=control_plane.ssh,
                    create=RETIRE_NODE,
                    env={**kubectl, "GENERATION_LABEL": MACHINE_GENERATION_LABEL,
                         **args.rollout.drain_env()},
                    depends_on=[control_plane.installed, *ready_to_join],
                    parent=self,
                )]
            joined = run_step(
                host,
                "join-worker",
                on=args.prepared.ssh,
                create=distribution.join_worker,
                delete=distribution.reset_node,
                env={
                    **{key: value for key, value in distribution.node_env(
                        host, host.address).items() if key not in distribution.version_env()},
                    **distribution.join_env(token),
                },
                depends_on=ready_to_join,
                parent=self,
            )
        # Runs on the controller: waits for Ready; on delete drains and removes the node
        # (deleted before the join step, whose delete then resets the host).
        admitted = run_step(
            host,
            "admit-node",
            on=control_plane.ssh,
            create=ADMIT_NODE,
            # The controller's own node goes away with the controller's reset.
            delete=None if host.runs_control_plane else REMOVE_NODE,
            env={
                **kubectl,
                "NODE_READY_TIMEOUT": str(args.rollout.node_ready_timeout_seconds),
                # remove-node's (the delete).
                **({} if host.runs_control_plane else {
                    "CONTROLLER_FILE": distribution.controller_file,
                    **args.rollout.drain_force_env()}),
            },
            depends_on=[joined],
            parent=self,
        )
        self.ready = []
        if not host.runs_control_plane:
            self.ready.append(uncordon_worker(host, distribution, controller=control_plane.ssh,
                            rollout=args.rollout,
                            host_settings=args.prepared.host_settings,
                            after=[installed, admitted], parent=self))
            # Workers read their kubelet settings only when they start.
            admitted = run_step(
                host,
                "apply-worker-profile",
                on=args.prepared.ssh,
                create=distribution.apply_worker_profile,
                env=distribution.worker_profile_env(host),
                depends_on=[admitted, control_plane.installed],
                parent=self,
            )
        if host.maintenance is not None:
            # Reads the wanted cordon on every run; taking the key out uncordons.
            self.ready.append(run_step(
                host,
                "maintenance",
                on=control_plane.ssh,
                create=MAINTAIN_NODE,
                delete=END_MAINTENANCE,
                env={**kubectl,
                     "MAINTENANCE": "true" if host.maintenance else "false",
                     **args.rollout.drain_env()},
                depends_on=[admitted],
                parent=self,
            ))
        self.node = node_metadata_patch(
            f"{host.name}-node-metadata", host, args.provider, [admitted], parent=self
        )
        self.ready.append(self.node)
        if args.provider_identity is not None:
            self.ready.append(node_identity_patch(
                f"{host.name}-node-identity", host.name, *args.provider_identity,
                args.provider, [self.node], parent=self))
        self.register_outputs({})


def node_metadata_patch(
    name: str, host: Host, provider: k8s.Provider, depends_on: list, parent: pulumi.Resource
) -> k8s.core.v1.NodePatch:
    """Labels and taints from config, kept in sync after registration (the kubelet only
    applies its --node-labels when the node is first created)."""
    return k8s.core.v1.NodePatch(
        name,
        metadata=k8s.meta.v1.ObjectMetaPatchArgs(
            name=host.name,
            labels=node_labels(host),
            # Take over the fields the kubelet set at registration.
            annotations={"pulumi.com/patchForce": "true"},
        ),
        # Node taints are an atomic list: only claim it when the config sets taints, so
        # taints others manage (cordon, not-ready) are left alone otherwise.
        spec=k8s.core.v1.NodeSpecPatchArgs(
            taints=[
                k8s.core.v1.TaintPatchArgs(key=t.key, value=t.value or None, effect=t.effect)
                for t in host.taints
            ],
        ) if host.taints else None,
        opts=pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=depends_on),
    )


# The region label the EFS CSI driver reads off EC2 (aws-efs-csi-driver v3.4.1
# pkg/cloud/k8s_metadata.go:55-58; the zone label stays unset: an empty zone reports no
# topology, pkg/util/util.go:95-98). A kubelet may set it itself (NodeRestriction's
# allowed kubernetes.io labels), but the kubelet applies labels only on registration.
REGION_LABEL = "topology.kubernetes.io/region"


def node_identity_patch(name: str, node_name: str, provider_id: str, region: str,
                        provider: k8s.Provider, depends_on: list,
                        parent: pulumi.Resource) -> k8s.core.v1.NodePatch:
    """spec.providerID and the region label, through the API rather than the kubelet's
    --provider-id: the API sets a providerID once, from "" (kubernetes pkg/apis/core/
    validation/validation.go ValidateNodeUpdate, "node updates may not change providerID
    except from \"\" to valid"), and a kubelet gives its flag only to a Node it creates
    (pkg/kubelet/kubelet_node_status.go initialNode), so a flag would not reach nodes
    already registered. Kept on delete: giving the field up would ask the API to clear it,
    which it refuses (docs/layouts.md, "EFS access")."""
    return k8s.core.v1.NodePatch(
        name,
        metadata=k8s.meta.v1.ObjectMetaPatchArgs(name=node_name, labels={REGION_LABEL: region}),
        spec=k8s.core.v1.NodeSpecPatchArgs(provider_id=provider_id),
        opts=pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=depends_on,
                                    retain_on_delete=True),
    )
