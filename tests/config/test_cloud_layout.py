"""Config checks of the cloud layout (issue: an adopted VPC, route tables, Kepler pools):
what is required is what the layout uses, and each refusal gives the true reason."""

from config import versions
from tests.config.loading import loads, problem_lines, problems_of
from tests.builders import cloud_config, hybrid_config

ADOPTED = {"id": "vpc-0123456789abcdef0", "cidr": "10.40.0.0/16",
           "subnetIds": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]}


def adopted(values: dict, **vpc) -> dict:
    values["aws"]["vpc"] = {**ADOPTED, **vpc}
    values["aws"]["controlPlane"] = {"privateIp": "10.40.0.10"}
    values["storage"] = {"efs": {"mountTargetAddress": "10.40.0.20", "anonymousNfs": True}}
    return values


def test_a_cloud_stack_adopts_a_vpc_without_route_tables():
    # Route tables carry the on-prem LAN through the VPN: a cloud stack has neither.
    assert loads(adopted(cloud_config())).aws.vpc.route_table_ids == []


def test_route_tables_on_a_cloud_stack_are_refused_as_unused():
    values = adopted(cloud_config(), routeTableIds=["rtb-0123456789abcdef0"])
    assert problems_of(values) == [("aws.vpc.routeTableIds", "is not used by the cloud "
                                    "layout (it routes the on-prem LAN through the VPN, "
                                    "which a cloud stack has not); remove it")]


def test_a_hybrid_stack_still_needs_the_route_tables():
    values = adopted(hybrid_config())
    values["network"]["lanCidr"] = "192.168.2.0/24"
    assert ("aws.vpc.routeTableIds", "an adopted VPC needs the route tables of its subnets "
            "(the on-prem LAN is routed there)") in problems_of(values)


def test_an_adopted_vpc_without_its_cidr_is_asked_for_it_and_no_default_is_named():
    values = adopted(cloud_config())
    del values["aws"]["vpc"]["cidr"]
    lines = problem_lines(values)
    assert lines == [
        "gpu-cluster:aws.vpc.cidr: is required with an adopted VPC (vpc-0123456789abcdef0): "
        "its IPv4 CIDR, which the security groups open the API and NFS to (`aws ec2 "
        "describe-vpcs --vpc-ids vpc-0123456789abcdef0 --query 'Vpcs[0].CidrBlock'`)"]
    assert not [line for line in lines if "10.20.0.0/16" in line]


def test_a_hybrid_adopted_vpc_without_its_cidr_names_no_default():
    values = adopted(hybrid_config(), routeTableIds=["rtb-0123456789abcdef0"])
    del values["aws"]["vpc"]["cidr"]
    values["vpn"]["tunnelCidr"] = "10.20.8.0/24"  # inside the default, not the user's VPC
    lines = problem_lines(values)
    assert [line.split(": ")[0] for line in lines] == ["gpu-cluster:aws.vpc.cidr"], lines


def test_a_kepler_pool_is_refused_as_unsupported_not_as_gpu_less():
    values = cloud_config()
    values["pools"][0]["instanceType"] = "p2.xlarge"
    values["pools"][0]["gpus"] = 1
    [(key, message)] = problems_of(values)
    assert key == "pools[0] (gpu).instanceType"
    assert message.startswith("'p2.xlarge' has NVIDIA K80 GPUs (Kepler), which are "
                              "unsupported: the pinned driver branch "
                              f"R{versions.NVIDIA_DRIVER_BRANCH} and the pools' default "
                              "image's driver dropped Kepler (R470 was its last branch")
    assert "no NVIDIA GPU" not in message and "legacy-gpu" in message
