"""Every AWS resource a stack creates carries the stack's `aws.tags` and the cluster tag:
through the AWS provider's default_tags where those reach, spelled out where they do not
(an auto scaling group's tags, a launch template's tag_specifications: see
components/aws/tags.py), and never through AWS's default provider, which has none."""

import importlib
import inspect
import json
from functools import cache

import pytest


from preview.plan import Plan, ResourceRecord
from preview.stack_file import EXAMPLE_STACKS, read_stack
from tests.builders import PROJECT_DIR, example_plan, cloud_config, hybrid_config, preview

CLUSTER_TAG = "gpu-cluster/cluster"
PROVIDER = "pulumi:providers:aws"
GROUP = "aws:autoscaling/group:Group"
TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
AWS_STACKS = sorted(
    name for name in EXAMPLE_STACKS
    if "gpu-cluster:aws" in read_stack(PROJECT_DIR, name).config)
STACK_TAGS = {"team": "ml", "cost-center": "4711"}


@cache
def takes_tags(type_: str) -> bool:
    """Whether the pulumi-aws resource of this type has a `tags` input."""
    module, _, name = type_.split(":", 1)[1].rpartition(":")
    cls = getattr(importlib.import_module(f"pulumi_aws.{module.split('/')[0]}"), name)
    return "tags" in inspect.signature(cls._internal_init).parameters


def default_tags(plan: Plan, resource: ResourceRecord) -> dict:
    """The default_tags of the provider the resource is created with ({} for none)."""
    if not resource.provider:
        return {}
    urn = resource.provider.rsplit("::", 1)[0]
    provider = plan.by_urn[urn]
    assert provider.type == PROVIDER
    value = provider.inputs.get("defaultTags") or {}
    # Provider inputs reach the engine JSON-encoded, as the CLI passes them.
    return (json.loads(value) if isinstance(value, str) else value).get("tags", {})


def untagged(plan: Plan, expected: dict) -> list[str]:
    """Where an AWS resource would end up without one of the `expected` tags."""
    problems = []
    for resource in plan.resources:
        if not resource.type.startswith("aws:") or not takes_tags(resource.type):
            continue
        if resource.type == GROUP:
            # Auto scaling groups take no default tags: their own, propagated at launch.
            carried = {t["key"]: t["value"] for t in resource.inputs.get("tags", [])
                       if t.get("propagateAtLaunch")}
        else:
            carried = {**default_tags(plan, resource), **(resource.inputs.get("tags") or {})}
        sets = {"tags": carried}
        if resource.type == TEMPLATE:
            # What a template's instances and volumes carry: no default tags reach them.
            sets.update({f"tagSpecifications[{spec['resourceType']}]": spec.get("tags") or {}
                         for spec in resource.inputs.get("tagSpecifications", [])})
            assert {"instance", "volume"} <= {s["resourceType"]
                                              for s in resource.inputs["tagSpecifications"]}
        problems += [f"{resource.name} {where}: {key}={value} missing"
                     for where, tags in sets.items()
                     for key, value in expected.items() if tags.get(key) != value]
    return problems


@pytest.mark.parametrize("stack", AWS_STACKS)
def test_every_aws_resource_of_the_example_stacks_carries_the_stack_and_cluster_tags(stack):
    stack_file = read_stack(PROJECT_DIR, stack)
    plan = example_plan(stack)
    # The CLI passes objects JSON-encoded.
    tags = json.loads(stack_file.config["gpu-cluster:aws"]).get("tags", {})
    cluster = stack_file.config["gpu-cluster:clusterName"]
    assert untagged(plan, {**tags, CLUSTER_TAG: cluster}) == []


@pytest.mark.parametrize("layout_config", [hybrid_config, cloud_config])
def test_every_aws_resource_carries_the_stack_and_cluster_tags(layout_config):
    values = layout_config()
    values["aws"]["tags"] = STACK_TAGS
    values["access"] = {"teams": [{"name": "research"}],
                        "users": [{"name": "ada", "role": "edit", "namespaces": ["research"]}]}
    plan = preview(values)
    assert any(r.type == "aws:ssm/parameter:Parameter" and "ada" in r.name
               for r in plan.resources)
    assert untagged(plan, {**STACK_TAGS, CLUSTER_TAG: values["clusterName"]}) == []


def test_a_resource_without_the_tags_is_found():
    """The check above finds a resource that would go untagged: one created with a
    provider that has no default_tags, and a template whose instances would carry none."""
    values = cloud_config()
    values["aws"]["tags"] = STACK_TAGS
    plan = preview(values)
    [provider] = plan.of_type(PROVIDER)
    provider.inputs.pop("defaultTags")
    [template] = plan.of_type(TEMPLATE)
    template.inputs["tagSpecifications"][0]["tags"] = {}
    problems = untagged(plan, {CLUSTER_TAG: values["clusterName"]})
    assert any(p.startswith("test-network-vpc tags:") for p in problems)
    assert f"{template.name} tagSpecifications[instance]: {CLUSTER_TAG}=test missing" in problems
    assert not any(p.startswith("test-gpu-asg") for p in problems)
