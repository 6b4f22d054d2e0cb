"""Each pool's price line (config/pool_prices.py): min × price to max × price at the pinned
on-demand price, a ceiling for spot and mixed pools, no figure for reserved capacity or where
the table has no price. The prices below are karpenter-provider-aws's generated table at the
pinned commit (config/versions.py EC2_PRICES_COMMIT, us-east-1: p5.48xlarge 55.040000,
p4d.24xlarge 21.957642, g5.12xlarge 5.672000, g5.24xlarge 8.144000, g5.xlarge 1.006000),
which tests/config/test_ec2_prices.py holds the table to."""

import re

import yaml

from config.pool_prices import pool_price_lines
from tests.builders import cloud_config
from tests.config.loading import loads
from tests.docs import section


def lines(region: str = "us-east-1", **keys) -> list[str]:
    values = cloud_config()
    values["aws"]["region"] = region
    values["pools"][0].update(keys)
    settings = loads(values)
    return pool_price_lines(settings.pools, settings.aws.region)


def test_an_on_demand_pool_costs_min_to_max_times_the_price():
    assert lines(instanceType="p5.48xlarge", gpus=8, count=0, min=0, max=2) == [
        "gpu-cluster:pools[0] (gpu): 0 to 2 × p5.48xlarge in us-east-1, on demand: $0.00 to "
        "$110.08 an hour ($55.04 each, AWS's Linux on-demand price of 2026-07-20)"]


def test_a_fixed_pool_has_one_figure_rounded_to_the_cent():
    # 3 × 21.957642 = 65.872926
    [line] = lines(instanceType="p4d.24xlarge", gpus=8, count=3)
    assert line.endswith(": 3 × p4d.24xlarge in us-east-1, on demand: $65.87 an hour "
                         "($21.957642 each, AWS's Linux on-demand price of 2026-07-20)")


def test_thousands_are_grouped():
    [line] = lines(instanceType="g5.xlarge", gpus=1, count=1, min=1, max=1000)
    assert "on demand: $1.01 to $1,006.00 an hour ($1.006 each" in line


def test_a_spot_pool_shows_the_on_demand_price_as_its_ceiling():
    [line] = lines(capacity="spot", count=1, min=0, max=4)
    assert line == (
        "gpu-cluster:pools[0] (gpu): 0 to 4 × g5.12xlarge in us-east-1, spot: at most $0.00 "
        "to $22.69 an hour at the on-demand price ($5.672 each, AWS's Linux on-demand price "
        "of 2026-07-20); all of them pay the spot price, unknown (it moves, and the program "
        "pins none) and capped at the on-demand price")


def test_a_mixed_pool_bounds_every_instance_by_its_dearest_type():
    [line] = lines(capacity="mixed", count=1, min=1, max=4, instanceTypes=["g5.24xlarge"],
                   onDemandBase=1, onDemandPercentage=25)
    # 1 × 8.144 and 4 × 8.144: any instance may be the dearer g5.24xlarge.
    assert line == (
        "gpu-cluster:pools[0] (gpu): 1 to 4 × g5.12xlarge, g5.24xlarge in us-east-1, mixed: "
        "at most $8.14 to $32.58 an hour at the on-demand price ($8.144 each for g5.24xlarge, "
        "the dearest type, AWS's Linux on-demand price of 2026-07-20); the first 1 instance and "
        "25% of the rest run on demand, the others pay the spot price, unknown (it moves, and the "
        "program pins none) and capped at the on-demand price")


def test_reserved_capacity_is_billed_by_the_reservation_with_no_figure():
    [reservation] = lines(capacityReservation="cr-0123456789abcdef0", count=0, min=0, max=2)
    [block] = lines(capacityReservation="cr-0123456789abcdef0", capacityBlock=True, count=0,
                    min=0, max=2)
    assert reservation.endswith("0 to 2 × g5.12xlarge in us-east-1: billed by the capacity "
                                "reservation cr-0123456789abcdef0, not per instance: no "
                                "figure here")
    assert "billed by the Capacity Block cr-0123456789abcdef0" in block
    assert "$" not in reservation + block


def test_a_type_or_region_without_a_pinned_price_says_so():
    [type_] = lines(instanceType="p5e.48xlarge", gpus=8)
    [region] = lines(region="eu-west-1")
    assert type_ == (
        "gpu-cluster:pools[0] (gpu): 2 × p5e.48xlarge in us-east-1: no price pinned for "
        "p5e.48xlarge in us-east-1 (config/ec2_prices.json has AWS's on-demand prices of "
        "2026-07-20 for us-east-1 only)")
    assert ": no price pinned for g5.12xlarge in eu-west-1 (" in region
    assert "$" not in type_ + region


def test_a_spot_pool_with_one_unpriced_type_has_no_ceiling():
    [line] = lines(instanceType="m6i.2xlarge", gpus=0, capacity="spot",
                   instanceTypes=["m5.2xlarge"])
    assert "no price pinned for m6i.2xlarge, m5.2xlarge in us-east-1" in line
    assert "$" not in line


def test_the_readme_example_is_what_the_program_prints():
    """README.md, "What a pool costs": its stack's pool gives the line it shows."""
    text = section("README.md", "What a pool costs")
    example, shown = re.findall(r"```(?:yaml)?\n(.*?)```", text, re.DOTALL)[:2]
    stack = yaml.safe_load(example)
    values = cloud_config()
    values["aws"]["region"] = stack["gpu-cluster:aws"]["region"]
    values["pools"] = stack["gpu-cluster:pools"]
    settings = loads(values)
    assert shown.splitlines()[1:] == [
        f"  info: {line}" for line in pool_price_lines(settings.pools, settings.aws.region)]
