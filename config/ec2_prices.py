"""EC2's on-demand prices of the GPU instance types, pinned: config/ec2_prices.json, taken
from karpenter-provider-aws's generated table at the commit config/versions.py names
(EC2_PRICES_*). Prices are strings as the file prints them (`%f`, dollars an hour), read as
Decimal so a pool's range is exact to the cent.

What the figures are: karpenter's generator (hack/code/prices_gen/main.go:43-46) writes the
`aws` partition for us-east-1 only, from the Price List API filtered to Linux, no
pre-installed software, on-demand, shared tenancy (bare metal: dedicated)
(pkg/providers/pricing/pricing.go:209-235, 258-291 at that commit). Only the types of
NVIDIA_GPU_FAMILIES are kept.

`python -m config.ec2_prices GIT_DIR COMMIT` rewrites the JSON from a fetched mirror of the
repository at COMMIT; then set EC2_PRICES_COMMIT, _BLOB and _GENERATED in config/versions.py
to what it prints."""

import functools
import json
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Optional

from config import versions
from config.cloud import NVIDIA_GPU_FAMILIES, instance_family

TABLE = Path(__file__).with_name("ec2_prices.json")

# The generated file's shapes (hack/code/prices_gen/main.go:106, 143-170).
GENERATED_AT = re.compile(r"^// generated at (\S+) for ", re.MULTILINE)
REGION_BLOCK = re.compile(r'^\t"([a-z0-9-]+)": \{\n(.*?)^\t\},?$', re.MULTILINE | re.DOTALL)
PRICE = re.compile(r'"([a-z0-9-]+\.[a-z0-9]+)": ?([0-9]+\.[0-9]+)')


def source() -> dict[str, str]:
    """Where the table comes from, as config/versions.py pins it."""
    return {"repository": versions.EC2_PRICES_REPOSITORY, "path": versions.EC2_PRICES_PATH,
            "commit": versions.EC2_PRICES_COMMIT, "blob": versions.EC2_PRICES_BLOB,
            "generatedAt": versions.EC2_PRICES_GENERATED}


@functools.cache
def _table() -> dict[str, dict[str, Decimal]]:
    document = json.loads(TABLE.read_text())
    # The JSON names its source; a table refreshed without its pin (or the reverse) stops here.
    if document["source"] != source():
        raise ValueError(f"{TABLE} is of {document['source']}, config/versions.py pins "
                         f"{source()}: refresh both together")
    return {region: {name: Decimal(price) for name, price in prices.items()}
            for region, prices in document["prices"].items()}


def on_demand_price(instance_type: str, region: str) -> Optional[Decimal]:
    """Dollars an hour for one instance on demand, or None where the table has no price."""
    return _table().get(region, {}).get(instance_type)


def regions() -> list[str]:
    """The regions the pinned table has prices for."""
    return sorted(_table())


def generated_at() -> str:
    """The day the pinned prices were read from AWS (the generated file's header)."""
    return versions.EC2_PRICES_GENERATED[:10]


def gpu_prices(go_source: str) -> dict[str, dict[str, str]]:
    """The generated file's prices of the NVIDIA GPU families, by region, as printed."""
    return {region: {name: price for name, price in PRICE.findall(body)
                     if instance_family(name) in NVIDIA_GPU_FAMILIES}
            for region, body in REGION_BLOCK.findall(go_source)}


def refresh(git_dir: str, commit: str) -> dict[str, str]:
    """Rewrites the JSON from the generated file at `commit` of a mirror; returns its source."""
    def git(*args: str) -> str:
        return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True,
                              capture_output=True, text=True).stdout
    commit = git("rev-parse", f"{commit}^{{commit}}").strip()
    text = git("show", f"{commit}:{versions.EC2_PRICES_PATH}")
    pinned = {**source(), "commit": commit,
              "blob": git("rev-parse", f"{commit}:{versions.EC2_PRICES_PATH}").strip(),
              "generatedAt": GENERATED_AT.search(text).group(1)}
    TABLE.write_text(json.dumps({"source": pinned, "prices": gpu_prices(text)}, indent=1,
                                sort_keys=True) + "\n")
    return pinned


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m config.ec2_prices GIT_DIR COMMIT")
    for key, value in refresh(*sys.argv[1:]).items():
        print(f"{key}: {value}")
