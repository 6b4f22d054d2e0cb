"""`gpu-cluster init` leaves out a host on an OS that preflight would refuse: the two agree."""

import re

from cli.discover import SUPPORTED_OS
from tests.builders import PROJECT_DIR


def test_init_accepts_exactly_the_os_preflight_accepts():
    preflight = (PROJECT_DIR / "components/scripts/preflight.sh").read_text()
    case = re.search(r"case \"\$id:\$version\" in\n\s*(.+)\) ok", preflight).group(1)
    accepted = {tuple(pattern.strip().split(":")) for pattern in case.split("|")}
    assert accepted == set(SUPPORTED_OS)
