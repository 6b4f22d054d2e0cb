"""The EC2 pools looked after from the control plane, so that no pool join token lasts and
nothing of a gone instance stays behind:

- gpu-cluster-pool-node-watcher on the controller (scripts/aws/pool-node-watcher.sh, every
  minute) deletes the SSM boot statuses of instances that are gone. It holds no Kubernetes
  credential, on any layout or distribution: the nodes of gone instances are deleted by the
  node lifecycle controller of the AWS cloud controller manager on the controllers
  (components/aws/cloud_controller.py; k8s.io/cloud-provider v0.35.0
  controllers/nodelifecycle/node_lifecycle_controller.go:129-178: a node not Ready whose
  instance the provider says does not exist), and no credential on a pool instance may
  delete a node. Its step removes the kubeconfig older releases kept for it on k0s's
  controllers.
- gpu-cluster-pool-tokens on the controller (scripts/aws/rotate-pool-tokens.sh, every
  ROTATE_EVERY) stores in each pool's SSM SecureString a new join token that expires after
  POOL_TOKEN_TTL; the program creates the parameter with a placeholder and never writes
  its value again. The install step rotates once before any pool instance starts.

The controller's role gets one policy of its own for this (controller_policy)."""

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from components.aws import ssm_paths
from components.common.remote_step import Ssh, run_step
from components.common.step_text import SSM_READER, DataFile, Script
from components.distributions.base import Distribution

WATCH_POOLS = Script("aws/watch-pools.sh")
POOL_NODE_WATCHER = DataFile("aws/pool-node-watcher.sh")
ROTATE_POOL_TOKENS = DataFile("aws/rotate-pool-tokens.sh")
EC2_INSTANCES = DataFile("aws/ec2-instances.py")
FORGET_BOOT_STATUSES = DataFile("aws/forget-boot-statuses.py")
# A pool's join token expires a day after it is made and is replaced every 6 h: one read
# at boot just before a rotation still has 18 h for the boot steps and the join.
POOL_TOKEN_TTL = "24h"
ROTATE_EVERY = "6h"
# What a pool's token parameter holds until the controller's first rotation.
TOKEN_PLACEHOLDER = "none: gpu-cluster-pool-tokens on the controller stores the join token"


def controller_policy(token_parameter_arns: Sequence[str], status_path: str) -> str:
    """The controller role's grant for the pools, apart from its other policies: listing
    instances (DescribeInstances has no resource types, so "*" is its only resource:
    https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2.html;
    the watcher filters by the cluster tag), writing the pools' token parameters, and
    listing and deleting the boot statuses below `status_path` (GetParametersByPath is
    authorized on the path asked for: https://docs.aws.amazon.com/systems-manager/latest/
    userguide/sysman-paramstore-access.html)."""
    prefix = token_parameter_arns[0].split(":parameter/", 1)[0]
    statuses = f"{prefix}:parameter{status_path}"
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Sid": "PoolNodeWatcherListsInstances", "Effect": "Allow",
         "Action": ["ec2:DescribeInstances"], "Resource": "*"},
        {"Sid": "PoolTokenRotationWritesTokens", "Effect": "Allow",
         "Action": ["ssm:PutParameter"], "Resource": sorted(token_parameter_arns)},
        {"Sid": "PoolNodeWatcherListsBootStatuses", "Effect": "Allow",
         "Action": ["ssm:GetParametersByPath"], "Resource": [statuses, f"{statuses}/*"]},
        {"Sid": "PoolNodeWatcherForgetsGoneInstances", "Effect": "Allow",
         "Action": ["ssm:DeleteParameter"], "Resource": f"{statuses}/*"},
    ]})


@dataclass(frozen=True, kw_only=True)
class PoolNodeCleanupArgs:
    cluster_name: str
    region: str
    distribution: Distribution
    # The controller: its name, SSH to it, its instance role, what the step waits for.
    controller: str
    ssh: Ssh
    controller_role: pulumi.Input[str]
    after: Sequence[pulumi.Resource] = field(default_factory=list)


class PoolNodeCleanup(pulumi.ComponentResource):
    def __init__(self, name: str, args: PoolNodeCleanupArgs,
                 opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:aws:PoolNodeCleanup", name, None, opts)
        self._name, self._args = name, args
        self._status_path = ssm_paths.boot_statuses(args.cluster_name)
        self.register_outputs({})

    def start(self, token_parameters: Sequence[aws.ssm.Parameter]) -> pulumi.Resource:
        """The controller's grant and the install step (which stores the first tokens);
        the pools' groups wait for it."""
        args = self._args
        opts = pulumi.ResourceOptions(parent=self)
        policy = aws.iam.RolePolicy(
            f"{self._name}-controller", role=args.controller_role,
            policy=pulumi.Output.all(*[p.arn for p in token_parameters]).apply(
                lambda arns: controller_policy(arns, self._status_path)), opts=opts)
        return run_step(args.controller, "watch-pools", on=args.ssh, create=WATCH_POOLS, env={
            "POOL_NODE_WATCHER": POOL_NODE_WATCHER.text(),
            "ROTATE_POOL_TOKENS": ROTATE_POOL_TOKENS.text(),
            "EC2_INSTANCES": EC2_INSTANCES.text(),
            "FORGET_BOOT_STATUSES": FORGET_BOOT_STATUSES.text(),
            "BOOT_STATUS_PATH": self._status_path,
            "AWS_CLIENT_TEXT": SSM_READER.text(),
            "AWS_REGION": args.region,
            "CLUSTER_NAME": args.cluster_name,
            "TOKEN_COMMAND": args.distribution.pool_token_command,
            "TOKEN_TTL": POOL_TOKEN_TTL,
            "ROTATE_EVERY": ROTATE_EVERY,
            "POOL_TOKEN_PARAMETERS": pulumi.Output.all(
                *[p.name for p in token_parameters]).apply(" ".join),
        }, depends_on=[*args.after, policy, *token_parameters], parent=self)
