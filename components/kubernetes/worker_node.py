"""A host joining the cluster as a worker: join, wait until Ready, keep labels and taints
in sync; on removal, drain and delete the node before resetting the host. From the
controller: cordon and drain it for maintenance, remove the node of a replaced machine."""

from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components.kubernetes.control_plane import ControlPlane
from components.distributions.base import Distribution, node_labels
from components.hosts.bootstrap import PreparedMachine
from components.common.remote_step import machine_env, run_step
from components.common.step_text import Script
from components.kubernetes.upgrade import drain_force_env, uncordon_worker, worker_upgrade
from config.model import MACHINE_GENERATION_LABEL, Host

MAINTAIN_NODE = Script("maintenance/maintain-node.sh", extra_libraries=("drain/lib.sh",))
END_MAINTENANCE = Script("maintenance/end-maintenance.sh")
RETIRE_NODE = Script("maintenance/retire-node.sh", extra_libraries=("drain/lib.sh",))
# The same for every distribution, which gives its kubectl and controller file as inputs.
ADMIT_NODE = Script("node/admit-node.sh")
REMOVE_NODE = Script("node/remove-node.sh", extra_libraries=("drain/lib.sh",))


@dataclass
class WorkerNodeArgs:
    host: Host
    # How long admit-node waits for the node to be Ready (kubernetes.nodeReadyTimeoutSeconds).
    node_ready_timeout_seconds: int
    distribution: Distribution
    machine: PreparedMachine
    control_plane: ControlPlane
    kubernetes: k8s.Provider
    # What must be up before the node can reach the control plane (the VPN tunnel).
    join_after: list = field(default_factory=list)
    # How long a drain may take (kubernetes.drainTimeoutSeconds): maintenance, a replaced
    # machine, an upgrade.
    drain_timeout_seconds: int = 600
    # kubernetes.upgrade.maxUnavailable as a count of workers: the bound drain-node keeps
    # on the controller (components/kubernetes/upgrade.py).
    max_unavailable: int = 1
    # kubernetes.drainForce: drains delete pods no controller manages.
    drain_force: bool = False


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
                host, distribution, controller=control_plane.ssh, node=args.machine.ssh,
                drain_timeout_seconds=args.drain_timeout_seconds,
                node_ready_timeout_seconds=args.node_ready_timeout_seconds,
                max_unavailable=args.max_unavailable,
                after=[control_plane.installed],
                node_ready=[args.machine.ready], parent=self, drain_force=args.drain_force)
            ready_to_join = [args.machine.ready, *args.join_after, installed]
            token = control_plane.join_token_for(host.name, after=ready_to_join,
                                                 env=machine_env(host))
            if host.generation:
                # New hardware under the old name: the old machine's node goes first.
                ready_to_join = ready_to_join + [run_step(
                    host.name,
                    "retire-node",
                    on=control_plane.ssh,
                    create=RETIRE_NODE,
                    env={**kubectl, **machine_env(host),
                         "DRAIN_TIMEOUT": str(args.drain_timeout_seconds),
                         "GENERATION_LABEL": MACHINE_GENERATION_LABEL,
                         **drain_force_env(args.drain_force)},
                    depends_on=[control_plane.installed, *ready_to_join],
                    parent=self,
                )]
            joined = run_step(
                host.name,
                "join-worker",
                on=args.machine.ssh,
                create=distribution.join_worker,
                delete=distribution.reset_node,
                env={
                    **{key: value for key, value in distribution.node_env(
                        host, host.address).items() if key not in distribution.version_env()},
                    **distribution.join_env(token),
                    **machine_env(host),
                },
                depends_on=ready_to_join,
                parent=self,
            )
        # Runs on the controller: waits for Ready; on delete drains and removes the node
        # (deleted before the join step, whose delete then resets the host).
        admitted = run_step(
            host.name,
            "admit-node",
            on=control_plane.ssh,
            create=ADMIT_NODE,
            # The controller's own node goes away with the controller's reset.
            delete=None if host.runs_control_plane else REMOVE_NODE,
            env={
                **kubectl,
                "NODE_READY_TIMEOUT": str(args.node_ready_timeout_seconds),
                **machine_env(host),
                # remove-node's (the delete).
                **({} if host.runs_control_plane else {
                    "CONTROLLER_FILE": distribution.controller_file,
                    **drain_force_env(args.drain_force)}),
            },
            depends_on=[joined],
            parent=self,
        )
        self.ready = []
        if not host.runs_control_plane:
            self.ready.append(uncordon_worker(host, distribution, controller=control_plane.ssh,
                            node_ready_timeout_seconds=args.node_ready_timeout_seconds,
                            host_settings=args.machine.host_settings,
                            after=[installed, admitted], parent=self))
            # Workers read their kubelet settings only when they start.
            admitted = run_step(
                host.name,
                "apply-worker-profile",
                on=args.machine.ssh,
                create=distribution.apply_worker_profile,
                env={**distribution.worker_profile_env(host), **machine_env(host)},
                depends_on=[admitted, control_plane.installed],
                parent=self,
            )
        if host.maintenance is not None:
            # Reads the wanted cordon on every run; taking the key out uncordons.
            self.ready.append(run_step(
                host.name,
                "maintenance",
                on=control_plane.ssh,
                create=MAINTAIN_NODE,
                delete=END_MAINTENANCE,
                env={**kubectl, **machine_env(host),
                     "MAINTENANCE": "true" if host.maintenance else "false",
                     "DRAIN_TIMEOUT": str(args.drain_timeout_seconds),
                     **drain_force_env(args.drain_force)},
                depends_on=[admitted],
                parent=self,
            ))
        self.node = node_metadata_patch(
            f"{host.name}-node-metadata", host, args.kubernetes, [admitted], parent=self
        )
        self.ready.append(self.node)
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
