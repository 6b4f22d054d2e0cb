"""Each EC2 pool's price an hour reaches what a reviewer of a pull request reads: the program
says it through pulumi.log.info (which `pulumi preview` prints), and the offline preview, run
as the `preview` command, prints it under "Info:" in its report, quiet or not, and its JSON.
The figures are the pinned table's (tests/config/test_pool_prices.py says which)."""

import json

import pytest

from preview import __main__ as preview_command
from preview.report import quiet_report, tree
from tests.builders import as_cli_config, cloud_config, shared_preview

RESERVATION = "cr-0123456789abcdef0"


def values() -> dict:
    config = cloud_config()
    config["aws"]["region"] = "us-east-1"
    config["pools"] = [
        {"name": "h100", "instanceType": "p5.48xlarge", "count": 0, "min": 0, "max": 2,
         "gpus": 8},
        {"name": "a10g", "instanceType": "g5.12xlarge", "count": 1, "min": 0, "max": 4,
         "gpus": 4, "capacity": "mixed", "instanceTypes": ["g5.24xlarge"],
         "onDemandBase": 1, "onDemandPercentage": 25},
        {"name": "block", "instanceType": "p5.48xlarge", "count": 0, "min": 0, "max": 2,
         "gpus": 8, "capacityReservation": RESERVATION, "capacityBlock": True},
        {"name": "h200", "instanceType": "p5e.48xlarge", "count": 1, "gpus": 8},
    ]
    return config


@pytest.fixture(scope="module")
def plan():
    return shared_preview(values())


H100 = ("gpu-cluster:pools[0] (h100): 0 to 2 × p5.48xlarge in us-east-1, on demand: $0.00 to "
        "$110.08 an hour ($55.04 each, AWS's Linux on-demand price of 2026-07-20)")


def test_the_program_says_each_pools_price_in_config_order(plan):
    assert len(plan.info) == 4
    h100, a10g, block, h200 = plan.info
    assert h100 == H100
    assert a10g.startswith("gpu-cluster:pools[1] (a10g): 0 to 4 × g5.12xlarge, g5.24xlarge in "
                           "us-east-1, mixed: at most $0.00 to $32.58 an hour at the on-demand "
                           "price ($8.144 each for g5.24xlarge")
    assert "the others pay the spot price, unknown" in a10g
    assert block == ("gpu-cluster:pools[2] (block): 0 to 2 × p5.48xlarge in us-east-1: billed "
                     f"by the Capacity Block {RESERVATION}, not per instance: no figure here")
    assert "no price pinned for p5e.48xlarge in us-east-1" in h200
    # Prices are information, not warnings.
    assert not [w for w in plan.warnings if "an hour" in w]


def test_the_report_prints_them_before_the_warnings(plan):
    for report in (tree(plan), quiet_report(plan)):
        lines = report.splitlines()
        start = lines.index("Info:")
        assert lines[start + 1] == f"  info: {H100}"
        assert lines[start + 5:start + 7] == ["", "Warnings:"]


def test_the_preview_command_prints_and_reports_them(tmp_path, capsys, monkeypatch):
    """`make preview` (`python -m preview STACK`), on a stack of these values, quiet or not,
    and its JSON report."""
    monkeypatch.setattr(preview_command, "read_stack",
                        lambda _project, stack: as_cli_config(values(), stack=stack))
    report = tmp_path / "report.json"
    assert preview_command.main(["prices", "--quiet", "--build-dir", str(tmp_path),
                                 "--json", str(report)]) == 0
    assert f"\nInfo:\n  info: {H100}\n" in capsys.readouterr().out
    assert json.loads(report.read_text())["info"][0] == H100
