"""The host firewall's real consumer: `nft -c -f` (a dry run of the transaction) in a
network and user namespace of its own, for the tests that read a host's ruleset."""

import shutil
import subprocess

import pytest


def nft_check(text: str) -> str:
    """nft's complaint about the ruleset `text`, "" when it takes it; skips the test
    where nft or unshare is missing."""
    nft, unshare = shutil.which("nft"), shutil.which("unshare")
    if nft is None or unshare is None:
        pytest.skip("nft (apt-get install nftables) and unshare (util-linux) are needed")
    result = subprocess.run([unshare, "-rn", nft, "-c", "-f", "-"], input=text,
                            capture_output=True, text=True, timeout=30)
    return "" if result.returncode == 0 else result.stderr or f"exit {result.returncode}"
