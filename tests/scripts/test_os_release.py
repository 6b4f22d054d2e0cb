"""os/lib.sh's os_release_field reads os-release as a real consumer does: Python's
platform.freedesktop_os_release (CPython Lib/platform.py, _parse_os_release), on the
distributions' files under os-release/ and on a file of the syntax's corners (escapes)."""

import platform
import subprocess
from pathlib import Path

import pytest

from tests.builders import PROJECT_DIR

FIXTURES = Path(__file__).parent / "os-release"
OS_LIB = PROJECT_DIR / "components/scripts/os/lib.sh"
FILES = sorted(path for path in FIXTURES.iterdir() if path.suffix != ".md")


def _bash_fields(root: Path, keys) -> dict:
    """Each key's value as os_release_field prints it for the host root `root`."""
    script = 'source "$1"; shift; for key; do printf "%s=" "$key"; os_release_field "$key" | ' \
             'od -An -c | tr -d "\\n"; echo; done'
    output = subprocess.run(["bash", "-c", script, "_", str(OS_LIB), *keys], check=True,
                            capture_output=True, text=True,
                            env={"GPU_CLUSTER_ROOT": str(root), "PATH": "/usr/bin:/bin"}).stdout
    return dict(line.split("=", 1) for line in output.splitlines())


def _od(text: str) -> str:
    """`text` and a line break, as `od -An -c` shows it (nothing for nothing)."""
    if not text:
        return ""
    return subprocess.run(["od", "-An", "-c"], input=text + "\n", capture_output=True,
                          text=True, check=True).stdout.replace("\n", "")


@pytest.mark.parametrize("fixture", FILES, ids=lambda path: path.name)
def test_os_release_field_reads_what_python_reads(fixture, tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/os-release").write_bytes(fixture.read_bytes())
    with fixture.open() as lines:
        python = platform._parse_os_release(lines)
    keys = sorted(set(python) | {"VERSION_ID", "INDENTED", "NOT_THERE"})
    assert _bash_fields(tmp_path, keys) == {key: _od(python.get(key, "")) for key in keys}


def test_the_documented_defaults_and_the_usr_lib_fallback(tmp_path):
    """Without /etc/os-release the file below /usr/lib is read (os-release(5)); ID, NAME and
    PRETTY_NAME default to linux, Linux, Linux there as in Python."""
    (tmp_path / "usr/lib").mkdir(parents=True)
    (tmp_path / "usr/lib/os-release").write_text("VERSION_ID=7\n")
    with (tmp_path / "usr/lib/os-release").open() as lines:
        python = platform._parse_os_release(lines)
    assert python["ID"] == "linux"
    keys = ["ID", "NAME", "PRETTY_NAME", "VERSION_ID"]
    assert _bash_fields(tmp_path, keys) == {key: _od(python[key]) for key in keys}
