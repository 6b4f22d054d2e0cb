"""The tags every AWS resource of a stack carries: the stack's `aws.tags` and the cluster
tag. They are the AWS provider's default_tags (components/layouts/aws.py), so a resource adds
only its own (Name, and what says something about that resource alone).

Default tags do not reach two places, which therefore carry them explicitly
(`propagated_tags`): an auto scaling group's tags (the terraform-provider-aws docs,
"Default Tags for Auto Scaling Groups": every resource but aws_autoscaling_group takes
them), and what a launch template's tag_specifications put on the instances and volumes it
launches (pulumi-aws getDefaultTags: "apply default tags to resources not directly managed
by a resource, such as the instances underneath an Auto Scaling group")."""

from collections.abc import Mapping

CLUSTER_TAG = "gpu-cluster/cluster"


def default_tags(cluster_name: str, stack_tags: Mapping[str, str]) -> dict[str, str]:
    """The provider's default_tags: the stack's tags and the cluster's."""
    return {**stack_tags, CLUSTER_TAG: cluster_name}


def propagated_tags(defaults: Mapping[str, str], own: Mapping[str, str]) -> dict[str, str]:
    """A resource's tags where the provider's defaults do not reach: both, spelled out."""
    return {**defaults, **own}
