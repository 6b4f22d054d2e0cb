"""aws.vpc.poolSubnetCidrs: the CIDRs of the adopted subnets the hybrid pools use, which
the on-prem side admits instead of the whole adopted VPC (config/cloud.py
pool_subnet_cidrs, node_cidrs); refused where it is not used or does not fit, every
problem at once and at the key."""

from config.cloud import node_cidrs, pool_subnet_cidrs
from tests.builders import cloud_config, hybrid_config, hybrid_pools_config
from tests.config.loading import loads, problems_of

VPC = "10.20.0.0/16"
KEY = "aws.vpc.poolSubnetCidrs"
SUBNETS = ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]
PRIVATE = ["subnet-0123456789abcdef2", "subnet-0123456789abcdef3"]


def adopted(values: dict, **vpc) -> dict:
    values["aws"]["vpc"] = {"id": "vpc-0123456789abcdef0", "cidr": VPC, "subnetIds": SUBNETS,
                            "routeTableIds": ["rtb-0123456789abcdef0"], **vpc}
    values["aws"]["controlPlane"] = {"privateIp": "10.20.0.10"}
    values["storage"]["efs"]["mountTargetAddress"] = "10.20.0.20"
    return values


def test_the_given_cidrs_replace_the_vpc_on_the_on_prem_side():
    given = ["10.20.0.0/20", "10.20.32.0/20"]
    vpc = loads(adopted(hybrid_pools_config(), poolSubnetCidrs=given)).aws.vpc
    assert pool_subnet_cidrs(vpc) == given
    assert node_cidrs(vpc, ["192.168.2.2"], pools=True) == ["192.168.2.2/32", *given]
    # Without it, as before: the whole VPC.
    assert pool_subnet_cidrs(loads(adopted(hybrid_pools_config())).aws.vpc) == [VPC]


def test_with_nat_there_is_one_per_private_subnet():
    values = adopted(hybrid_pools_config(), egress="nat", privateSubnetIds=PRIVATE,
                     poolSubnetCidrs=["10.20.128.0/24", "10.20.129.0/24"])
    assert pool_subnet_cidrs(loads(values).aws.vpc) == ["10.20.128.0/24", "10.20.129.0/24"]
    values["aws"]["vpc"]["poolSubnetCidrs"] = ["10.20.128.0/24"]
    assert problems_of(values) == [(KEY, "lists 1 CIDRs for the 2 subnets of "
                                    "aws.vpc.privateSubnetIds the pools use; give each one's "
                                    "CIDR")]


def test_every_problem_of_the_cidrs_at_once_at_the_key():
    values = adopted(hybrid_pools_config(), poolSubnetCidrs=[
        "10.20.0.0/24", "10.99.0.0/24", "10.20.0.128/25"])
    assert problems_of(values) == [
        (KEY, "lists 3 CIDRs for the 2 subnets of aws.vpc.subnetIds the pools use; give each "
         "one's CIDR"),
        (f"{KEY}[1]", "10.99.0.0/24 is outside gpu-cluster:aws.vpc.cidr 10.20.0.0/16"),
        (f"{KEY}[2]", "10.20.0.128/25 overlaps an earlier one")]


def test_not_a_cidr_is_refused_at_its_item():
    values = adopted(hybrid_pools_config(), poolSubnetCidrs=["10.20.0.0/24", "10.20.1.0/24 x"])
    [(path, _)] = problems_of(values)
    assert path == f"{KEY}[1]"


UNUSED = (KEY, "is only used on the hybrid layout with pools in an adopted VPC (aws.vpc.id); "
          "remove it")


def test_refused_where_it_is_not_used():
    cidrs = ["10.20.0.0/24", "10.20.1.0/24"]
    # A VPC the program creates: it knows its subnets' CIDRs.
    created = hybrid_pools_config()
    created["aws"]["vpc"] = {"poolSubnetCidrs": cidrs}
    assert problems_of(created) == [UNUSED]
    # No pools: the on-prem side admits no pool subnet.
    assert problems_of(adopted(hybrid_config(), poolSubnetCidrs=cidrs)) == [UNUSED]
    # The cloud layout has no on-prem side.
    cloud = cloud_config()
    cloud["aws"]["vpc"] = {"id": "vpc-0123456789abcdef0", "cidr": VPC, "subnetIds": SUBNETS,
                           "poolSubnetCidrs": cidrs}
    cloud["aws"]["controlPlane"] = {"privateIp": "10.20.0.10"}
    cloud["storage"]["efs"]["mountTargetAddress"] = "10.20.0.20"
    assert problems_of(cloud) == [UNUSED]
