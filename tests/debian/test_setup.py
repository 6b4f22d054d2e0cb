"""`make test`'s own set-up (tests/debian/setup.sh), run by bash against fake `apt-get` and
`id` commands on PATH: what it installs as root, what it tells a user who is not, and that
its list names every Debian package a test asks for when it skips."""

import os
import re
import subprocess
from pathlib import Path

from tests.builders import PROJECT_DIR

SETUP = PROJECT_DIR / "tests" / "debian" / "setup.sh"
PACKAGES = PROJECT_DIR / "tests" / "debian" / "packages.txt"


def listed_packages() -> dict:
    rows = (line.split() for line in PACKAGES.read_text().splitlines())
    return {row[0]: row[1] for row in rows if row and not row[0].startswith("#")}


# `apt-get download PACKAGE...`: a real .deb per package in the current folder, built by
# dpkg-deb, holding an executable usr/sbin/PACKAGE.
FAKE_DOWNLOAD = r"""[ "$1" = download ] || exit 0
shift; [ "$1" = -qq ] && shift
for package; do
  root=$(mktemp -d) && mkdir -p "$root/DEBIAN" "$root/usr/sbin" && chmod 755 "$root"
  printf 'Package: %s\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@example.invalid>\nDescription: t\n' \
    "$package" >"$root/DEBIAN/control"
  printf '#!/bin/sh\n' >"$root/usr/sbin/$package" && chmod 755 "$root/usr/sbin/$package"
  dpkg-deb --build -Zgzip "$root" "${package}_1.0_all.deb" >/dev/null && rm -rf "$root"
done
"""


def run_setup(tmp_path: Path, *, uid: int, lines: str, env: dict | None = None):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "apt-calls"
    (bin_dir / "apt-get").write_text(f'#!/bin/sh\necho "$*" >>"{calls}"\n{FAKE_DOWNLOAD}')
    (bin_dir / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    listing = tmp_path / "packages.txt"
    listing.write_text(lines)
    result = subprocess.run(
        ["bash", str(SETUP)], capture_output=True, text=True,
        env={"PATH": f"{bin_dir}:{os.environ['PATH']}", "DEBIAN_PACKAGES_LIST": str(listing),
             "DEBIAN_EXTRACT_DIR": str(tmp_path / "unpacked"), **(env or {})})
    return result, calls.read_text().splitlines() if calls.exists() else []


LIST = ("# comment\nbash   bash   always here\n"
        "gpu-cluster-absent-a   gpu-cluster-absent-a   a tool not installed\n"
        "gpu-cluster-absent-b   /nonexistent/tool      one found by its path\n")


def test_as_root_it_installs_exactly_the_missing_packages(tmp_path):
    result, calls = run_setup(tmp_path, uid=0, lines=LIST)
    assert result.returncode == 0, result.stderr
    assert calls == ["update -qq", "install -y -qq gpu-cluster-absent-a gpu-cluster-absent-b"]


def test_without_root_it_names_the_packages_and_the_command_and_fails(tmp_path):
    result, calls = run_setup(tmp_path, uid=1000, lines=LIST)
    assert result.returncode == 1 and calls == []
    assert ("sudo apt-get install -y gpu-cluster-absent-a gpu-cluster-absent-b"
            in result.stderr), result.stderr


UNPACKED = "gpu-cluster-unpacked   extract:usr/sbin/gpu-cluster-unpacked   never installed\n"


def test_an_extract_only_package_is_unpacked_never_installed_and_needs_no_root(tmp_path):
    result, calls = run_setup(tmp_path, uid=1000, lines="bash bash always here\n" + UNPACKED)
    assert result.returncode == 0, result.stderr
    assert calls == ["download -qq gpu-cluster-unpacked"]
    tool = tmp_path / "unpacked" / "gpu-cluster-unpacked" / "usr" / "sbin" / "gpu-cluster-unpacked"
    assert os.access(tool, os.X_OK), result.stderr
    (tmp_path / "again").mkdir()
    again, calls = run_setup(tmp_path / "again", uid=1000, lines=UNPACKED, env={
        "DEBIAN_EXTRACT_DIR": str(tmp_path / "unpacked")})
    assert (again.returncode, again.stderr, calls) == (0, "", [])


def test_as_root_it_installs_the_missing_packages_then_unpacks_the_others(tmp_path):
    result, calls = run_setup(tmp_path, uid=0, lines=LIST + UNPACKED)
    assert result.returncode == 0, result.stderr
    assert calls == ["update -qq", "install -y -qq gpu-cluster-absent-a gpu-cluster-absent-b",
                     "download -qq gpu-cluster-unpacked"]
    assert (tmp_path / "unpacked" / "gpu-cluster-unpacked" / "usr" / "sbin").is_dir()


def test_with_everything_installed_it_does_nothing(tmp_path):
    result, calls = run_setup(tmp_path, uid=0, lines="bash bash always here\n")
    assert (result.returncode, result.stderr, calls) == (0, "", [])


def test_the_explicit_opt_out_runs_the_tests_with_their_skips(tmp_path):
    result, calls = run_setup(tmp_path, uid=1000, lines=LIST,
                              env={"GPU_CLUSTER_TESTS_WITHOUT_DEBIAN": "1"})
    assert result.returncode == 0 and calls == []
    assert "gpu-cluster-absent-a gpu-cluster-absent-b" in result.stderr


def test_every_package_a_skipping_test_names_is_in_the_list():
    asked = set()
    for path in (PROJECT_DIR / "tests").rglob("*"):
        if path.suffix in (".py", ".bats", ".bash") and path != Path(__file__):
            for match in re.finditer(r"apt-get install ([a-z0-9][a-z0-9 .+-]*)", path.read_text()):
                asked.update(word for word in match.group(1).split() if word != "-y")
    assert asked and asked <= set(listed_packages()), asked - set(listed_packages())


def test_make_test_and_ci_use_the_one_list():
    makefile = (PROJECT_DIR / "Makefile").read_text()
    test_recipe = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "tests/debian/setup.sh" in test_recipe
    ci = (PROJECT_DIR / ".ci" / "run").read_text()
    assert not set(listed_packages()) & set(re.findall(r"missing\+=\(([a-z0-9-]+)\)", ci))
