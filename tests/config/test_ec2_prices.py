"""The pinned EC2 price table (config/ec2_prices.json) is what karpenter-provider-aws's
generated file says at the pinned commit (config/versions.py EC2_PRICES_*): read from a
fetched mirror of the repository (KARPENTER_MIRROR, default the `fetch` location), skipped
with the reason when there is none. The file is parsed here on its own, entry by entry, not by
config/ec2_prices.py's parser."""

import json
import os
import re
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest

from config import ec2_prices, versions
from config.cloud import NVIDIA_GPU_FAMILIES, instance_family
from config.instance_types import GPU_INSTANCE_TYPES

MIRROR = Path(os.environ.get("KARPENTER_MIRROR",
                             "/work/.mirror/aws+karpenter-provider-aws/repo"))


def _git(*args: str) -> str:
    return subprocess.run(["git", f"--git-dir={MIRROR}", *args], check=True,
                          capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def upstream() -> str:
    if not MIRROR.is_dir():
        pytest.skip(f"no mirror of aws/karpenter-provider-aws at {MIRROR} "
                    "(fetch github:aws/karpenter-provider-aws, or set KARPENTER_MIRROR)")
    spec = f"{versions.EC2_PRICES_COMMIT}:{versions.EC2_PRICES_PATH}"
    if subprocess.run(["git", f"--git-dir={MIRROR}", "cat-file", "-e", spec]).returncode:
        pytest.skip(f"the mirror at {MIRROR} lacks {spec}")
    return _git("show", spec)


def _regions(text: str) -> dict[str, dict[str, str]]:
    """Every `"type": price` entry of the file, by the region whose block it is in."""
    regions: dict[str, dict[str, str]] = {}
    current = None
    for line in text.splitlines():
        opening = re.fullmatch(r'\t"([a-z0-9-]+)": \{', line)
        if opening:
            current = regions.setdefault(opening.group(1), {})
        elif line.startswith("\t}"):
            current = None
        elif current is not None and not line.strip().startswith("//"):
            for entry in filter(None, (part.strip() for part in line.split(","))):
                name, price = entry.split(":")
                current[name.strip().strip('"')] = price.strip()
    return regions


def _table() -> dict:
    return json.loads(ec2_prices.TABLE.read_text())


def test_the_table_is_the_generated_files_gpu_entries(upstream):
    regions = _regions(upstream)
    expected = {region: {name: price for name, price in prices.items()
                         if instance_family(name) in NVIDIA_GPU_FAMILIES}
                for region, prices in regions.items()}
    assert _table()["prices"] == expected
    # The parse above saw the whole file: its aws partition is us-east-1 alone
    # (hack/code/prices_gen/main.go:43-46), hundreds of types.
    assert list(regions) == ["us-east-1"] and len(regions["us-east-1"]) > 500


def test_the_pin_is_the_files_commit_blob_and_header(upstream):
    assert _git("rev-parse", f"{versions.EC2_PRICES_COMMIT}:{versions.EC2_PRICES_PATH}"
                ).strip() == versions.EC2_PRICES_BLOB
    assert f"// generated at {versions.EC2_PRICES_GENERATED} for us-east-1\n" in upstream
    assert _table()["source"] == ec2_prices.source()


def test_the_refresh_command_writes_the_same_table(upstream, tmp_path, monkeypatch):
    monkeypatch.setattr(ec2_prices, "TABLE", tmp_path / "ec2_prices.json")
    assert ec2_prices.refresh(str(MIRROR), versions.EC2_PRICES_COMMIT) == ec2_prices.source()
    assert (tmp_path / "ec2_prices.json").read_text() == \
        (Path(ec2_prices.__file__).with_name("ec2_prices.json")).read_text()


def test_every_gpu_type_the_program_knows_has_a_us_east_1_price():
    # cluster-autoscaler's types (config/instance_types.py); p5e.48xlarge is in neither table.
    assert set(GPU_INSTANCE_TYPES) <= set(_table()["prices"]["us-east-1"])
    assert ec2_prices.on_demand_price("p5.48xlarge", "us-east-1") == Decimal("55.04")
    assert ec2_prices.on_demand_price("p5e.48xlarge", "us-east-1") is None
    assert ec2_prices.on_demand_price("p5.48xlarge", "eu-west-1") is None


def test_a_table_without_its_pin_is_refused(tmp_path, monkeypatch):
    document = _table()
    document["source"]["commit"] = "0" * 40
    (tmp_path / "ec2_prices.json").write_text(json.dumps(document))
    monkeypatch.setattr(ec2_prices, "TABLE", tmp_path / "ec2_prices.json")
    ec2_prices._table.cache_clear()
    try:
        with pytest.raises(ValueError, match="refresh both together"):
            ec2_prices.on_demand_price("p5.48xlarge", "us-east-1")
    finally:
        ec2_prices._table.cache_clear()
