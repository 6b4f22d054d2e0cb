"""EC2 GPU workers (cloud and hybrid layouts) that join the cluster at boot, with no SSH from
the program: the launch template's user data fetches and runs the same step scripts as bare metal
(host settings, NVIDIA runtime, the join), and the join token is read at boot from an
SSM SecureString that only the pool's instance role may read, and that the controller
refills with a new expiring token (components/aws/pool_node_cleanup.py). A changed launch
template rolls the pool (instance refresh); the controller deletes the node of an instance
that left the pool."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_aws as aws

from components.aws import ssm_paths
from components.aws.boot import (
    EC2_SSH_PORT,
    BootReport,
    BootStore,
    MachineBoot,
    instance_profile,
    machine_boot,
    secret_parameter,
)
from components.aws.network import AwsNetwork, pinned_image
from components.distributions.base import Distribution
from components.aws.tags import propagated_tags
from components.hosts.steps import HostStep, HostProfile
from components.aws.pool_node_cleanup import TOKEN_PLACEHOLDER
from components.aws.spot_notices import spot_notices_step
from config import versions
from config.hosts import WorkerPool
from config.pool_tags import autoscaler_tags
from contract.names import POOL_LABEL

# A refresh replaces instances a few at a time, keeping this share of the pool in service.
REFRESH_MIN_HEALTHY_PERCENT = 90


def pool_machine(pool: WorkerPool) -> HostProfile:
    """What a pool's host preparation is for. NVSWITCH auto: on p4d/p5-class instances the
    NVSwitches are on the PCI bus, so install-nvidia installs Fabric Manager with the
    driver, or with the image's driver checks that the image's Fabric Manager runs."""
    return HostProfile(gpus=pool.gpus, install_driver=pool.install_driver, nvswitch="auto",
                       ssh_port=EC2_SSH_PORT, on_ec2=True)


@dataclass(frozen=True)
class PoolBoot:
    """What one pool's instances run at boot, from facts the composer works out once: the
    cluster and region they report to, the pool, and the host preparation steps for
    `pool_machine(pool)` (components/hosts/steps.py)."""

    cluster_name: str
    region: str
    pool: WorkerPool
    preparation: Sequence[HostStep]
    # The image mirror's password, stored for the instances (preparation reads it).
    registry_password: Optional[pulumi.Input[str]] = None


@dataclass(frozen=True, kw_only=True)
class GpuWorkerPoolArgs:
    boot: PoolBoot
    network: AwsNetwork
    distribution: Distribution
    # Inbound rules between nodes reference it; the control plane's group allows the rest.
    node_security_group: aws.ec2.SecurityGroup
    # Where its boot's bundle and plan are fetched from.
    boot_store: BootStore
    # The provider's default_tags (components/aws/tags.py): what the group and the launch
    # template's instances and volumes carry explicitly, since default tags miss them.
    default_tags: Mapping[str, str]
    # What the launch template waits for: the controller's upgrade, so a raised
    # kubernetes.version reaches new instances only once the API server runs it (kubelets
    # may not be newer than the API server: https://kubernetes.io/releases/version-skew-policy/#kubelet).
    after: Sequence[pulumi.Resource] = ()


class GpuWorkerPool(pulumi.ComponentResource):
    def __init__(self, name: str, args: GpuWorkerPoolArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:aws:GpuWorkerPool", name, None, opts)
        self._name, self._args = name, args
        self._opts = pulumi.ResourceOptions(parent=self)
        pool = args.boot.pool
        self.token_parameter = self._store_join_token()
        self._reads = [self.token_parameter]
        if args.boot.registry_password is not None:
            self._reads.append(secret_parameter(
                f"{name}-image-mirror-password", ssm_paths.pool_secret(
                    args.boot.cluster_name, pool.name, ssm_paths.IMAGE_MIRROR_PASSWORD),
                args.boot.registry_password, self._tags(), self._opts))
        boot = machine_boot(name, pool.name, pool_boot_steps(args.boot, args.distribution),
                            args.boot_store, BootReport(args.boot.region, ssm_paths.boot_status(
                                args.boot.cluster_name, pool.name)), opts=self._opts)
        profile = self._create_instance_profile(boot)
        self.role_arn, self.role_name = profile.role_arn, profile.role
        self.image = pool.ami or pinned_image(versions.GPU_IMAGE_OWNER, versions.GPU_IMAGE_NAME,
                                              parent=self)
        self._template = self._create_launch_template(profile, boot)

    def launch(self, after: Sequence[pulumi.Resource]) -> aws.autoscaling.Group:
        """The pool's group, once `after` is done (the controller stored the pool's first
        join token)."""
        name, args, pool, template = self._name, self._args, self._args.boot.pool, self._template
        placement = (aws.ec2.PlacementGroup(f"{name}-placement", strategy="cluster",
                                            tags=self._tags(), opts=self._opts)
                     if pool.placement_group else None)
        # A cluster placement group lives in one zone: the first subnet's.
        subnets = args.network.node_subnet_ids
        subnets = subnets[:1] if placement else subnets
        version = template.latest_version.apply(str)
        self.group = aws.autoscaling.Group(
            f"{name}-asg",
            # count is the size at creation only; then cluster-autoscaler sets the desired
            # capacity within min and max (it "will only adjust the desired value",
            # kubernetes/autoscaler cluster-autoscaler-1.36.1 cloudprovider/aws/README.md:
            # 182-183), which ignore_changes below leaves to it.
            min_size=pool.min_size, max_size=pool.max_size, desired_capacity=pool.count,
            vpc_zone_identifiers=subnets,
            placement_group=placement.id if placement else None,
            # An on-demand pool keeps its one instance type (and the group its inputs);
            # spot and mixed pools launch through a mixed instances policy, which takes
            # the template's place (the provider: launch_template conflicts with it).
            launch_template=None if pool.capacity != "on-demand" else
            aws.autoscaling.GroupLaunchTemplateArgs(id=template.id, version=version),
            mixed_instances_policy=mixed_instances_policy(pool, template.id, version),
            # A new template version (new boot steps, image or settings) replaces the
            # instances a few at a time: the provider starts a refresh whenever
            # launch_template changes (terraform-provider-aws, autoscaling_group
            # instance_refresh: "A refresh is started when any of the following Auto
            # Scaling Group properties change: launch_configuration, launch_template,
            # mixed_instances_policy").
            instance_refresh=aws.autoscaling.GroupInstanceRefreshArgs(
                strategy="Rolling",
                preferences=aws.autoscaling.GroupInstanceRefreshPreferencesArgs(
                    min_healthy_percentage=REFRESH_MIN_HEALTHY_PERCENT, skip_matching=True)),
            tags=[aws.autoscaling.GroupTagArgs(key=k, value=v, propagate_at_launch=True)
                  for k, v in self._propagated_tags().items()] +
            # What cluster-autoscaler reads of the group, not the instances' business.
            [aws.autoscaling.GroupTagArgs(key=k, value=v, propagate_at_launch=False)
             for k, v in autoscaler_tags(args.boot.cluster_name, pool).items()],
            # The token must be readable before the first instance boots. The desired
            # capacity is cluster-autoscaler's once the group exists: Pulumi then uses the
            # value in its state, the program's only at creation ("ignoreChanges",
            # https://www.pulumi.com/docs/iac/concepts/options/ignorechanges/, which also
            # says to refresh so the state holds the live value), as the AWS provider
            # advises for a group something else scales (pulumi_aws 7.51.1
            # autoscaling/policy.py: "You may want to omit desired_capacity attribute from
            # attached autoscaling.Group"); its update sends DesiredCapacity only when that
            # input changed (terraform-provider-aws resourceGroupUpdate, d.HasChange). A
            # fixed pool still follows count: a new min above, or max below, the group's
            # size moves it there (UpdateAutoScalingGroup, Auto Scaling API reference).
            opts=pulumi.ResourceOptions(parent=self,
                                        depends_on=[self.token_parameter, *after],
                                        ignore_changes=["desiredCapacity"]),
        )
        self.register_outputs({"tokenParameter": self.token_parameter.name})
        return self.group

    def _tags(self) -> dict:
        """The pool's own tags; the stack's and the cluster's are the provider's defaults."""
        boot = self._args.boot
        return {"Name": f"{boot.cluster_name}-{boot.pool.name}",
                POOL_LABEL: boot.pool.name}

    def _propagated_tags(self) -> dict:
        return propagated_tags(self._args.default_tags, self._tags())

    def _store_join_token(self) -> aws.ssm.Parameter:
        """The parameter the controller keeps the pool's current join token in: its value
        is the controller's (ignore_changes), never the program's."""
        boot = self._args.boot
        return secret_parameter(f"{self._name}-join-token",
                                ssm_paths.pool_join_token(boot.cluster_name, boot.pool.name),
                                TOKEN_PLACEHOLDER, self._tags(), pulumi.ResourceOptions.merge(
                                    self._opts, pulumi.ResourceOptions(ignore_changes=["value"])))

    def _create_instance_profile(self, machine: MachineBoot) -> aws.iam.InstanceProfile:
        boot = self._args.boot
        return instance_profile(
            f"{self._name}-node", self._reads,
            ssm_paths.boot_status(boot.cluster_name, boot.pool.name), self._tags(), self._opts,
            machine.object_arns)

    def _create_launch_template(self, profile: aws.iam.InstanceProfile,
                                machine: MachineBoot) -> aws.ec2.LaunchTemplate:
        boot, network = self._args.boot, self._args.network
        pool = boot.pool
        return aws.ec2.LaunchTemplate(
            f"{self._name}-template",
            image_id=self.image,
            instance_type=pool.instance_type,
            iam_instance_profile=aws.ec2.LaunchTemplateIamInstanceProfileArgs(arn=profile.arn),
            # With egress public the instance's own public address is its way out (an
            # internet gateway serves only addresses that have one); with nat it has none.
            network_interfaces=[aws.ec2.LaunchTemplateNetworkInterfaceArgs(
                device_index=0,
                associate_public_ip_address=str(network.nodes_need_public_ip).lower(),
                security_groups=[self._args.node_security_group.id],
                delete_on_termination="true")],
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_tokens="required", http_endpoint="enabled", http_put_response_hop_limit=1),
            block_device_mappings=[aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name="/dev/sda1",
                ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                    volume_size=pool.root_volume_gb, volume_type="gp3", encrypted="true",
                    delete_on_termination="true"))],
            user_data=machine.user_data,
            **reserved_capacity(pool),
            tag_specifications=[aws.ec2.LaunchTemplateTagSpecificationArgs(
                resource_type=kind, tags=self._propagated_tags())
                for kind in ("instance", "volume")],
            tags=self._tags(),
            update_default_version=True,
            # Its instances fetch their bundle and plan as they boot.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*self._args.after,
                                                                 *machine.objects]),
        )



def pool_boot_steps(boot: PoolBoot, distribution: Distribution) -> list[HostStep]:
    """Host settings, the NVIDIA runtime (GPU pools), the reboot those need and the check
    after it, then the join (nothing on the instance removes its node: the controller does),
    then the service that cordons and drains the node on EC2's Spot notices."""
    pool = boot.pool
    steps = list(boot.preparation)
    steps.append(HostStep("join-worker", distribution.join_worker, {
        **distribution.node_env(pool, ""),
        **distribution.join_from_ssm_env(
            ssm_paths.pool_join_token(boot.cluster_name, pool.name)),
        # Only recorded: new kubelet settings roll the pool (new instances start with them).
        "WORKER_PROFILE_VALUES": distribution.worker_profile_values(),
    }))
    steps.append(spot_notices_step(distribution))
    return steps


def mixed_instances_policy(pool: WorkerPool, template_id: pulumi.Input[str],
                           version: pulumi.Input[str]) \
        -> Optional[aws.autoscaling.GroupMixedInstancesPolicyArgs]:
    """A spot or mixed pool's instance types and markets (Auto Scaling User Guide, "Auto Scaling
    groups with multiple instance types and purchase options"): instanceType first, then
    instanceTypes. On-demand instances take the types in that order ("prioritized", the
    default for listed types); spot ones the pools "price-capacity-optimized" picks, lowest
    priced among those least likely to be interrupted, which AWS recommends ("Allocation
    strategies for multiple instance types"). A spot pool is all spot (base 0, 0%); a mixed
    one has onDemandBase instances on-demand, then onDemandPercentage of the rest
    (InstancesDistribution, Auto Scaling API reference). cluster-autoscaler builds its node
    template from the first type (aws_wrapper.go:767-768)."""
    if pool.capacity == "on-demand":
        return None
    mixed = pool.capacity == "mixed"
    return aws.autoscaling.GroupMixedInstancesPolicyArgs(
        instances_distribution=aws.autoscaling.GroupMixedInstancesPolicyInstancesDistributionArgs(
            on_demand_allocation_strategy="prioritized",
            on_demand_base_capacity=pool.on_demand_base_size if mixed else 0,
            on_demand_percentage_above_base_capacity=pool.on_demand_percentage if mixed else 0,
            spot_allocation_strategy="price-capacity-optimized"),
        launch_template=aws.autoscaling.GroupMixedInstancesPolicyLaunchTemplateArgs(
            launch_template_specification=aws.autoscaling.
            GroupMixedInstancesPolicyLaunchTemplateLaunchTemplateSpecificationArgs(
                launch_template_id=template_id, version=version),
            overrides=[aws.autoscaling.GroupMixedInstancesPolicyLaunchTemplateOverrideArgs(
                instance_type=kind) for kind in [pool.instance_type, *pool.instance_types]]))


def reserved_capacity(pool: WorkerPool) -> dict:
    """The launch template's inputs that launch into pools[].capacityReservation, and only
    into it (a targeted reservation; when it is full the launch fails rather than run
    unreserved). A Capacity Block also needs market type capacity-block ("Use Capacity Blocks
    for machine learning workloads", Auto Scaling User Guide: the launch template names the
    block's reservation id and instance type; AWS::EC2::LaunchTemplate InstanceMarketOptions:
    MarketType spot | capacity-block)."""
    if pool.capacity_reservation is None:
        return {}
    inputs = {"capacity_reservation_specification":
              aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
                  capacity_reservation_target=aws.ec2.
                  LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                      capacity_reservation_id=pool.capacity_reservation))}
    if pool.capacity_block:
        inputs["instance_market_options"] = aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(
            market_type="capacity-block")
    return inputs
