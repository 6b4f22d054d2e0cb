"""Each script's header declares its inputs (components/common/script_inputs.py), and this
holds the script to it: every name it reads from its environment is declared, every
declared name is read, every required one is checked (require_env, check_missing_env,
require_set, or a loop that names the empty ones). The steps' rendering holds Python to the
same header; test_rendered_steps_pass_what_their_scripts_declare checks what the example
stacks render."""

import pytest

from components.common.script_inputs import EVERY_STEP, declared_inputs, step_declared
from components.common.step_text import read_script
from tests.scripts.script_scan import all_scripts, scan_files, script_files, sources_lib

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


@pytest.mark.parametrize("script", [s for s in SCRIPTS if s.endswith(".sh")])
def test_every_required_input_is_checked(script: str):
    required = declared_inputs(read_script(script)).required
    if not sources_lib(script):
        pytest.skip("runs before the machine has lib.sh (the bundle, the boot part)")
    unchecked = sorted(required - scan_files(script_files(script)).checked)
    assert not unchecked, (f"{script} requires {unchecked} (its '# Inputs:' line) but checks "
                           "none of them with require_env or check_missing_env")
