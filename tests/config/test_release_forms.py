"""The release versions the config accepts are the ones the install scripts accept: bash
itself judges each sample with the pattern the script checks, beside the config's."""

import re
import subprocess

import pytest

from components.common.bundle import SCRIPTS_DIR
from config import versions

SAMPLES = ["v1.36.3+k0s.2", "v1.30.0-rc.1+k0s.0", "v1.36.3+rke2r1", "v1.36.3-rc1+rke2r2",
           "v1.36.3+k0s.2\n", "v1.36.3", "1.36.3+k0s.2", "v1.36.3+k0s.", "v1.36.3+rke2r",
           "v1.36.3+k0s.2; reboot", "v\uff11.36.3+k0s.2", "v\uff11.36.3+rke2r1",
           "v1.36.3 +k0s.2", ""]


def script_pattern(name: str) -> str:
    """The pattern the distribution's lib.sh gives node/lib.sh to check a version with
    (<PREFIX>_RELEASE)."""
    text = (SCRIPTS_DIR / name / "lib.sh").read_text()
    return re.search(rf"^{name.upper()}_RELEASE='([^']+)'$", text, re.M).group(1)


def bash_accepts(pattern: str, value: str) -> bool:
    result = subprocess.run(["bash", "-c", 'pattern=$1; [[ "$2" =~ $pattern ]]', "bash",
                             pattern, value], capture_output=True, timeout=10)
    return result.returncode == 0


@pytest.mark.parametrize("name", sorted(versions.DISTRIBUTIONS))
def test_the_config_and_the_script_accept_the_same_versions(name):
    pattern = script_pattern(name)
    form = versions.DISTRIBUTIONS[name].release_form
    judged = {value: (bool(form.fullmatch(value)), bash_accepts(pattern, value))
              for value in SAMPLES}
    assert {value: both for value, both in judged.items() if both[0] != both[1]} == {}
    assert judged[versions.DISTRIBUTIONS[name].pin] == (True, True)
