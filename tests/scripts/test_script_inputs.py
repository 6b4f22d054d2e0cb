"""Each script's header declares its inputs (components/common/script_inputs.py), and this
holds the script to it: every name it reads from its environment is declared, every
declared name is read, every required one is checked (require_env, check_missing_env,
require_set, or a loop that names the empty ones). The steps' rendering holds Python to the
same header; test_rendered_steps_pass_what_their_scripts_declare checks what the example
stacks render."""

import pytest

from components.aws.boot import bootstrap_part
from components.common.script_inputs import (
    EVERY_STEP,
    StepInputsError,
    declared_inputs,
    step_declared,
)
from components.common.step_text import read_script
from tests.scripts.script_scan import all_scripts, scan_files, script_files

SCRIPTS = all_scripts()
# Inputs a script hands on to the one it runs rather than reads: bootstrap.sh's code is
# boot user data, which cannot change without replacing the instances.
HANDED_ON = {"boot/bootstrap.sh": {"BOOT_STATUS_PARAMETER"}}


def test_there_are_scripts():
    assert len(SCRIPTS) > 50


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_name_a_script_reads_is_declared(script: str):
    files = script_files(script)
    scan = scan_files(files)
    declared = step_declared(files)
    # A name it checks is an input even where a library also sets it (the library's
    # value would win over the step's).
    undeclared = {name for name in (scan.environment | scan.checked) - EVERY_STEP
                  if not declared.declares(name)}
    assert not undeclared, (f"{script} reads {sorted(undeclared)} from its environment; "
                            f"its header declares {sorted(declared.names)}")


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_declared_name_is_read(script: str):
    scan = scan_files(script_files(script))
    unread = sorted(name for name in declared_inputs(read_script(script)).names
                    if "<n>" not in name and not scan.reads_name(name)
                    and name not in HANDED_ON.get(script, ()))
    assert not unread, f"{script} declares {unread} but never reads them"


# Checks none of its inputs itself: its code is the boot user data (a change replaces every
# instance), and it runs before the machine has lib.sh. Its one renderer checks them
# instead (test below), and its `set -u` ends it on any that is unset.
CHECKED_WHERE_RENDERED = "boot/bootstrap.sh"


@pytest.mark.parametrize("script", [s for s in SCRIPTS if s.endswith(".sh")
                                    and s != CHECKED_WHERE_RENDERED])
def test_every_required_input_is_checked(script: str):
    required = declared_inputs(read_script(script)).required
    unchecked = sorted(required - scan_files(script_files(script)).checked)
    assert not unchecked, (f"{script} requires {unchecked} (its '# Inputs:' line) but checks "
                           "none of them with require_env, check_missing_env or a loop that "
                           "names the empty ones")


@pytest.mark.parametrize("name", sorted(
    declared_inputs(read_script(CHECKED_WHERE_RENDERED)).required - {"S3_GET"}))
def test_the_boot_part_is_not_rendered_without_an_input_of_bootstrap(name: str):
    # S3_GET: bootstrap_part adds it itself.
    env = {other: "x" for other in declared_inputs(read_script(CHECKED_WHERE_RENDERED)).required
           if other not in (name, "S3_GET")}
    with pytest.raises(StepInputsError, match=f"{CHECKED_WHERE_RENDERED} requires {name} "):
        bootstrap_part("gpu-pool-0", env)
