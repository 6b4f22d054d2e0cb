"""Shared fixtures; what tests build stacks and plans with is tests/builders.py."""

import copy
import sys
from pathlib import Path

import pytest

PROJECT_DIR = Path(__file__).resolve().parent.parent
if str(PROJECT_DIR) not in sys.path:
    sys.path.insert(0, str(PROJECT_DIR))

from preview import engine  # noqa: E402
from preview.plan import Plan  # noqa: E402
from tests.builders import NO_SKIPS, SeededBuilds, bare_metal_config, example_plan  # noqa: E402


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Where nothing may skip (NO_SKIPS), a skip is a failure that gives its reason."""
    outcome = yield
    report = outcome.get_result()
    if NO_SKIPS and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        reason = str(reason).removeprefix("Skipped: ")
        report.outcome = "failed"
        report.longrepr = (f"skipped where every tool the tests need is installed "
                           f"(GPU_CLUSTER_NO_SKIPS=1, make test as root): {reason}")


@pytest.fixture
def base_config() -> dict:
    return copy.deepcopy(bare_metal_config())


@pytest.fixture(scope="session")
def lab_plan() -> Plan:
    return example_plan("lab")


@pytest.fixture(scope="session")
def seeded_build(tmp_path_factory) -> SeededBuilds:
    """seeded_build(stack): the example stack's build folder under the records' seed,
    written once per test process; read it, or copy it to change it."""
    return SeededBuilds(tmp_path_factory.mktemp("seeded-builds"))


@pytest.fixture
def provider_state(monkeypatch):
    """Values providers make (keys, certificates, tokens, a step's output) as a stack's
    state holds them: made once, then the same on every later run, and known to each
    run's plan as the secrets they are."""
    made: dict = {}
    original = engine.PreviewMocks.new_resource

    def new_resource(self, args):
        if args.typ in engine._GENERATED_OUTPUTS or args.typ.startswith("command:"):
            key = (args.typ, args.name)
            if key not in made:
                before, made_before = set(self.plan.secrets), set(self.plan.provider_made)
                made[key] = (original(self, args), set(self.plan.secrets) - before,
                             self.plan.provider_made - made_before)
            result, secrets, provider_made = made[key]
            self.plan.add_secrets(secrets)
            self.plan.provider_made |= provider_made
            return result
        return original(self, args)

    monkeypatch.setattr(engine.PreviewMocks, "new_resource", new_resource)
