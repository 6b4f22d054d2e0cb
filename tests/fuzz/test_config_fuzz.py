"""Config fuzzing: mutations of the example stacks never end in a traceback. Each one either
loads into a valid config and previews, or fails with ConfigError listing its problems by
key, without quoting a secret.

Fixed seed and example counts, so CI runs the same cases every time (~1 min in all):
FAST_EXAMPLES through the config loader, PREVIEW_EXAMPLES through the whole offline
preview. Re-run with another seed: FUZZ_SEED=123 pytest tests/fuzz."""

import os
import time

import copy

from hypothesis import HealthCheck, example, given, seed, settings

from config import ConfigError, load
from preview.engine import _secret_strings, run_program
from tests.conftest import PROJECT_DIR
from tests.fuzz.mutations import BASES, as_stack_file, broken_stack

SEED = int(os.environ.get("FUZZ_SEED", "20260521"))
# Longer hunts: FUZZ_SCALE=20 runs twenty times as many examples.
SCALE = int(os.environ.get("FUZZ_SCALE", "1"))
FAST_EXAMPLES = 4000 * SCALE
PREVIEW_EXAMPLES = 150 * SCALE
_SETTINGS = dict(deadline=None, database=None, print_blob=True,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                        HealthCheck.large_base_example])
SECRET_PARTS = {part for values, keys in BASES.values() for key in keys
                for part in _secret_strings(values[key]) if len(part) >= 8}
# What the runs saw, for the summary test at the end.
SEEN = {"loaded": 0, "refused": 0, "previewed": 0, "seconds": 0.0}


def check_refusal(error: ConfigError) -> None:
    assert error.problems, "a ConfigError without problems"
    text = str(error)
    assert text.startswith("invalid stack configuration (")
    for problem in error.problems:
        assert str(problem).startswith("gpu-cluster:") and problem.message.strip(), problem
    assert not any(part in text for part in SECRET_PARTS), "an error message quotes a secret"


def load_or_refuse(stack, values, secret_keys):
    """The loaded settings, or None when the config was refused properly."""
    stack_file = as_stack_file(stack, values, secret_keys)
    try:
        return load(stack_file.config, stack_file.secret_keys, stack=stack)
    except ConfigError as error:
        check_refusal(error)
        return None


@seed(SEED)
@settings(max_examples=FAST_EXAMPLES, **_SETTINGS)
@given(case=broken_stack())
def test_mutated_config_loads_or_lists_its_problems(case):
    stack, values, secret_keys, _ = case
    started = time.perf_counter()
    settings_ = load_or_refuse(stack, values, secret_keys)
    SEEN["loaded" if settings_ else "refused"] += 1
    SEEN["seconds"] += time.perf_counter() - started


def _regression(stack: str, key: str, value) -> tuple:
    values, secret_keys = copy.deepcopy(BASES[stack])
    values[f"gpu-cluster:{key}"] = value
    return stack, values, secret_keys, [f"{key} set"]


@seed(SEED)
@settings(max_examples=PREVIEW_EXAMPLES, **_SETTINGS)
@given(case=broken_stack(max_mutations=1))
# Found by this test: the longest cluster name made certificate common names over X.509's 64.
@example(case=_regression("prod", "clusterName", "c" * 49))
@example(case=_regression("prod", "clusterName", "c" * 63))
def test_mutated_config_previews_or_lists_its_problems(case):
    stack, values, secret_keys, _ = case
    started = time.perf_counter()
    stack_file = as_stack_file(stack, values, secret_keys)
    try:
        plan = run_program(PROJECT_DIR, stack_file)
    except ConfigError as error:
        check_refusal(error)
    else:
        assert plan.resources and "kubeconfig" in plan.outputs
        SEEN["previewed"] += 1
    SEEN["seconds"] += time.perf_counter() - started


def test_the_fuzzing_reached_both_outcomes():
    """Not only refusals: mutations that stay valid are previewed as well."""
    if SEEN["loaded"] + SEEN["refused"] < FAST_EXAMPLES:
        return  # run alone (-k): nothing to sum up
    assert SEEN["loaded"] > 20 and SEEN["refused"] > 300, SEEN
    assert SEEN["previewed"] > 5, SEEN
