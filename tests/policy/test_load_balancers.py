"""load-balancers-filtered on the cloud layout's plan of three controllers: its internal load
balancer and its public one pass; a public one with a second port, no security group, or a
group open to everyone fails, naming it."""

import dataclasses

import pytest

from policy import offline
from policy.stack_rules import load_balancers_filtered
from tests.builders import cloud_config, shared_preview
from tests.stacks.ec2_controllers import three_controllers

PUBLIC = "test-public-api-nlb"


@pytest.fixture(scope="module")
def resources():
    plan = shared_preview(three_controllers(cloud_config(), "k0s"))
    return offline.stack_resources_of_plan(plan)


def listener(resources, name: str):
    return next(r for r in resources if r.name == name and r.type == "aws:lb/listener:Listener")


def test_the_internal_and_the_public_load_balancer_pass(resources):
    balancers = {r.name: r.props["internal"] for r in resources
                 if r.type == "aws:lb/loadBalancer:LoadBalancer"}
    assert balancers == {"test-api-nlb": True, PUBLIC: False}
    assert load_balancers_filtered(resources) == []
    assert offline.evaluate_stack(resources) == []


def test_a_second_port_on_the_public_one_fails(resources):
    api = listener(resources, "test-public-api-kubernetes-api")
    extra = dataclasses.replace(api, id=api.id + "-ssh", name="extra",
                                props={**api.props, "port": 22})
    assert load_balancers_filtered([*resources, extra]) == [
        (PUBLIC, f"{PUBLIC}: faces the internet with listeners on ports 22, 6443; only the "
                 "API's may be")]


def test_the_public_one_without_a_group_or_with_one_open_to_everyone_fails(resources):
    bare = [dataclasses.replace(r, property_dependencies={
        **r.property_dependencies, "securityGroups": []}) if r.name == PUBLIC else r
        for r in resources]
    assert load_balancers_filtered(bare) == [
        (PUBLIC, f"{PUBLIC}: faces the internet without a security group to filter its clients")]
    rule = next(r for r in resources if r.type.endswith("SecurityGroupIngressRule")
                and r.name == "test-public-api-kubernetes-api-0")
    opened = [dataclasses.replace(r, props={**r.props, "cidrIpv4": "0.0.0.0/0"})
              if r is rule else r for r in resources]
    assert load_balancers_filtered(opened) == [
        (PUBLIC, f"{PUBLIC}: faces the internet and its group test-public-api-sg admits "
                 f"everyone ({rule.name})")]


def test_the_internal_one_is_not_judged_by_its_ports(resources):
    api = listener(resources, "test-api-kubernetes-api")
    extra = dataclasses.replace(api, id=api.id + "-ssh", name="extra",
                                props={**api.props, "port": 22})
    assert load_balancers_filtered([*resources, extra]) == []
