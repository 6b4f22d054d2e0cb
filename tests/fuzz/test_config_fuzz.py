"""Config fuzzing: mutations of the example stacks never end in a traceback. Each one either
loads into a valid config and previews, or fails with ConfigError listing its problems by
key, without quoting a secret; what previews renders scripts in which every value,
hostile ones included, stays a value.

Fixed seed and example counts, so every run tries the same cases: FAST_EXAMPLES through
the config loader, PREVIEW_EXAMPLES through the whole offline preview (CI: 4000 and 150;
a developer's run: 300 and 10). Re-run with another seed: FUZZ_SEED=123 pytest tests/fuzz."""

import copy
import json
import os
import shlex
import shutil
import subprocess

from hypothesis import HealthCheck, example, given, seed, settings
from pulumi.runtime import rpc

from components.aws.boot import boot_scripts
from config import ConfigError, load
from preview.engine import _secret_strings, run_program
from tests.builders import CI_BUDGET, PROJECT_DIR
from tests.fuzz.mutations import BASES, as_stack_file, broken_stack

SEED = int(os.environ.get("FUZZ_SEED", "20260521"))
# A developer's run: a short fixed-seed budget; CI the full one (tests/builders.py
# CI_BUDGET). Longer hunts: FUZZ_SCALE=20 runs twenty times as many examples.
SCALE = int(os.environ.get("FUZZ_SCALE", "1"))
FAST_EXAMPLES = (4000 if CI_BUDGET else 300) * SCALE
PREVIEW_EXAMPLES = (150 if CI_BUDGET else 10) * SCALE
_SETTINGS = dict(deadline=None, database=None, print_blob=True,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                        HealthCheck.large_base_example])
def _as_text(value) -> str:
    """A secret as the CLI hands it over: text, or a secret map (kubeflowPasswordHashes) as
    JSON."""
    return value if isinstance(value, str) else json.dumps(value)


SECRET_PARTS = {part for values, keys in BASES.values() for key in keys
                for part in _secret_strings(_as_text(values[key])) if len(part) >= 8}


def check_refusal(error: ConfigError) -> None:
    assert error.problems, "a ConfigError without problems"
    text = str(error)
    assert text.startswith("invalid stack configuration (")
    for problem in error.problems:
        # A misspelt namespace's problem names the key as the stack file spells it.
        assert str(problem).startswith(f"{problem.namespace}:") and problem.message.strip()
        assert problem.namespace == "gpu-cluster" or "did you mean 'gpu-cluster:" in \
            problem.message, problem
    assert not any(part in text for part in SECRET_PARTS), "an error message quotes a secret"


def load_or_refuse(stack, values, secret_keys):
    """The loaded settings, or None when the config was refused properly."""
    stack_file = as_stack_file(stack, values, secret_keys)
    try:
        return load(stack_file.config, stack_file.secret_keys, stack=stack)
    except ConfigError as error:
        check_refusal(error)
        return None


def _regression(stack: str, key: str, value) -> tuple:
    values, secret_keys = copy.deepcopy(BASES[stack])
    values[f"gpu-cluster:{key}"] = value
    return stack, values, secret_keys, [f"{key} set"]


def _changed(stack: str, what: str, change) -> tuple:
    """A reproducer: the example stack with `change(values)` applied."""
    values, secret_keys = copy.deepcopy(BASES[stack])
    change(values)
    return stack, values, secret_keys, [what]


def _client_to_existing_without_lan(values):
    values["gpu-cluster:vpn"]["mode"] = "client-to-existing"
    del values["gpu-cluster:network"]["lanCidr"]


def _small_vpc_with_efs_address(values):
    values["gpu-cluster:aws"]["vpc"]["cidr"] = "10.20.0.0/28"
    values["gpu-cluster:storage"]["efs"] = {"mountTargetAddress": "10.20.0.5"}


# Earlier reproducers (issue reports and this test's finds), run first every time.
REPRODUCERS = [
    _changed("prod", "client-to-existing without lanCidr", _client_to_existing_without_lan),
    _changed("prod", "a VPC too small, an EFS address", _small_vpc_with_efs_address),
    _changed("dev", "cloud without sshPrivateKey",
             lambda v: v.pop("gpu-cluster:sshPrivateKey")),
    _changed("lab", "a host name ending in a newline",
             lambda v: v["gpu-cluster:hosts"][0].update(name=v["gpu-cluster:hosts"][0]["name"] + "\n")),
    _changed("dev", "a shell substitution in a resolv.conf path",
             lambda v: v.setdefault("gpu-cluster:tuning", {}).update(
                 kubeletResolvConf="/etc/resolv.conf\n$(touch /tmp/pwned)")),
    _changed("lab", "an SSH user with a command", lambda v: v.setdefault("gpu-cluster:ssh", {})
             .update(user="ubuntu; touch /tmp/pwned")),
    _changed("lab", "gpus: true", lambda v: v["gpu-cluster:hosts"][1].update(gpus=True)),
    _changed("lab", "a snake_case key", lambda v: v.setdefault("gpu-cluster:tuning", {})
             .update(disable_iommu=False)),
    _changed("lab", "a misspelt namespace",
             lambda v: v.update({"gpu-clustr:kubeflow": v.pop("gpu-cluster:storage")})),
    _changed("lab", "NFS exporting /etc",
             lambda v: v["gpu-cluster:storage"].update(nfs={"host": "controller", "path": "/etc"})),
    _changed("lab", "10,000 hosts", lambda v: v.update({"gpu-cluster:hosts": [
        {"name": f"h{i}", "address": f"10.{i // 65536}.{i // 256 % 256}.{i % 256}"}
        for i in range(10_000)]})),
]


def _with_examples(cases):
    def decorate(test):
        for case in reversed(cases):
            test = example(case=case)(test)
        return test
    return decorate


@seed(SEED)
@settings(max_examples=FAST_EXAMPLES, **_SETTINGS)
@given(case=broken_stack())
@_with_examples(REPRODUCERS)
def _through_the_loader(case, seen: dict):
    stack, values, secret_keys, _ = case
    settings_ = load_or_refuse(stack, values, secret_keys)
    seen["loaded" if settings_ else "refused"] += 1


@seed(SEED)
@settings(max_examples=PREVIEW_EXAMPLES, **_SETTINGS)
@given(case=broken_stack(max_mutations=1))
# Found by this test: the longest cluster name made certificate common names over X.509's 64.
@example(case=_regression("prod", "clusterName", "c" * 49))
@example(case=_regression("prod", "clusterName", "c" * 63))
@_with_examples(REPRODUCERS[:-1])
def _through_the_preview(case, seen: dict):
    stack, values, secret_keys, _ = case
    stack_file = as_stack_file(stack, values, secret_keys)
    try:
        plan = run_program(PROJECT_DIR, stack_file)
    except ConfigError as error:
        check_refusal(error)
        seen["refused"] += 1
    else:
        assert plan.resources and "kubeconfig" in plan.outputs
        check_scripts(plan)
        seen["previewed"] += 1


def test_mutated_config_loads_or_lists_its_problems():
    seen = {"loaded": 0, "refused": 0}
    _through_the_loader(seen=seen)
    print(f"fuzzing the loader: {seen}")  # the figures, with -s
    # Not only refusals: mutations that stay valid load as well.
    assert seen["loaded"] > FAST_EXAMPLES // 200 and seen["refused"] > FAST_EXAMPLES // 15, seen


def test_mutated_config_previews_or_lists_its_problems():
    seen = {"previewed": 0, "refused": 0}
    _through_the_preview(seen=seen)
    print(f"fuzzing the preview: {seen}")
    assert seen["previewed"] > PREVIEW_EXAMPLES // 30, seen


def rendered_scripts(plan) -> list[str]:
    """Every script the plan would run on a host: SSH steps' command lines and stdin, boot
    user data parts."""
    scripts = []
    for step in plan.of_type("command:remote:Command"):
        for key in ("create", "update", "delete", "stdin"):
            value = step.inputs.get(key)
            value = rpc.unwrap_rpc_secret(value) if rpc.is_rpc_secret(value) else value
            if isinstance(value, str):
                scripts.append(value)
    for kind in ("aws:ec2/instance:Instance", "aws:ec2/launchTemplate:LaunchTemplate"):
        for resource in plan.of_type(kind):
            user_data = resource.inputs.get("userData") or resource.inputs.get("userDataBase64")
            if isinstance(user_data, str):
                scripts += boot_scripts(user_data)
    return scripts


def check_scripts(plan) -> None:
    """What a config value reached stays a value: each script parses, and a hostile
    payload that got through the config is one word of an assignment, never a command."""
    bash = shutil.which("bash")
    for script in rendered_scripts(plan):
        parsed = subprocess.run([bash, "--pretty-print"], input=script, capture_output=True,
                                text=True, timeout=60)
        assert parsed.returncode == 0, parsed.stderr
        for line in parsed.stdout.splitlines():
            if "pwned" in line:
                words = shlex.split(line)
                assert len(words) == 2 and words[0] == "export" and "=" in words[1], line
