"""The EC2 GPU pools both AWS layouts build the same way (cloud: the only workers; hybrid:
beside the on-prem hosts, in the same VPC as the controllers): each pool's boot, its
group once the controller stored its first join token, the controller's services that
rotate those tokens and forget the instances a pool let go (run over SSH on the
controller on both layouts: components/aws/pool_node_cleanup.py), and cluster-autoscaler's
grant on the controllers' roles. What each layout adds (EFS grants) stays in its module."""

from collections.abc import Mapping
from typing import Optional

from components.aws import ssm_paths
from components.aws.autoscaler_policy import allow_autoscaling
from components.aws.gpu_worker_pool import (
    GpuWorkerPool,
    GpuWorkerPoolArgs,
    PoolBoot,
    pool_machine,
)
from components.aws.pool_node_cleanup import PoolNodeCleanup, PoolNodeCleanupArgs
from components.hosts.steps import preparation_steps
from components.kubernetes.control_plane import ControlPlane
from components.layouts.aws import AwsSide, boot_password, mirror_password
from components.layouts.contract import ClusterContext, LayoutResult, frozen_mapping
from components.layouts.over_ssh import registries_env
from config.autoscaling import autoscales
from config.hosts import WorkerPool
from config.model import StackConfig
from contract import names


def pool_boots(context: ClusterContext) -> list[PoolBoot]:
    """What each pool's instances run at boot, worked out once from the whole stack."""
    settings, distribution = context.settings, context.distribution
    return [PoolBoot(settings.cluster_name, settings.aws.region, pool,
                     tuple(preparation_steps(context.host_settings, distribution,
                                           pool_machine(pool), registries=registries_env(
                                               settings, distribution, boot_password(
                                                   settings, ssm_paths.pool_secret(
                                                       settings.cluster_name, pool.name,
                                                       ssm_paths.IMAGE_MIRROR_PASSWORD))))),
                     registry_password=mirror_password(settings))
            for pool in settings.pools]


def ec2_pools(context: ClusterContext, aws_side: AwsSide,
              control_plane: ControlPlane) -> list[GpuWorkerPool]:
    """The pools, whose instances join at boot with the token the controller keeps in SSM,
    and the controller's services that rotate those tokens and delete the boot statuses of
    the instances a pool let go (their nodes: the AWS cloud controller manager). The
    controller installs them over SSH once it is up: on cloud after its boot, on hybrid
    after its preparation (control_plane.ssh either way); its instance role, which both
    layouts give it, holds their grant."""
    settings = context.settings
    if not settings.pools:
        return []
    pools = [
        GpuWorkerPool(f"{context.name}-{boot.pool.name}", GpuWorkerPoolArgs(
            boot=boot, network=aws_side.network, distribution=context.distribution,
            node_security_group=aws_side.network.node_security_group,
            boot_store=aws_side.boot_store,
            default_tags=aws_side.default_tags, after=[control_plane.installed]),
            opts=aws_side.opts)
        for boot in pool_boots(context)
    ]
    cleanup = PoolNodeCleanup(f"{context.name}-node-cleanup", PoolNodeCleanupArgs(
        cluster_name=settings.cluster_name, region=settings.aws.region,
        distribution=context.distribution,
        controller=control_plane.host.name, ssh=control_plane.ssh,
        controller_role=aws_side.instance.role_name,
        after=[control_plane.installed]), opts=aws_side.opts)
    started = cleanup.start([p.token_parameter for p in pools])
    for pool in pools:
        pool.launch(after=[started])
    if autoscales(pools):
        # cluster-autoscaler runs on a controller, with its role (the pools' get none).
        allow_autoscaling(f"{context.name}-cluster-autoscaler",
                          [controller.role_name for controller in aws_side.controllers],
                          settings.cluster_name, settings.aws.region, aws_side.opts)
    return pools


def pools_outputs(settings: StackConfig, pools: list[GpuWorkerPool],
                  result: LayoutResult) -> Optional[Mapping]:
    """The outputs the pools add: their images beside the controller's, and the `pools`
    output; None without pools."""
    if not pools:
        return None
    return frozen_mapping({
        "images": {**result.outputs["images"],
                   **{pool.name: p.image for pool, p in zip(settings.pools, pools)}},
        names.POOLS_OUTPUT: [pool_output(p) for p in settings.pools]})


def pool_output(pool: WorkerPool) -> dict:
    """A pool as the `pools` output lists it (contract/names.py POOLS_OUTPUT)."""
    return {"name": pool.name, "instanceType": pool.instance_type, "count": pool.count,
            "min": pool.min_size, "max": pool.max_size, "capacity": pool.capacity,
            "capacityReservation": pool.capacity_reservation, "gpus": pool.gpus,
            "gpuModel": pool.gpu_model}
