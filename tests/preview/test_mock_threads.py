"""The SDK registers resources from its thread pool (pulumi 3.272.0 sdk/python/lib/pulumi/
runtime/resource.py, register_resource: run_in_executor), so the preview's mocks make
several resources at once: what each adds to the plan must survive the others'. A lost
secret is shown unredacted in the build folder, and a plan whose secrets differ from
another's compares as changed (tests/stacks/test_credential_rotation.py)."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from pulumi.runtime import mocks, rpc

from preview import engine
from preview.plan import Plan
from tests.builders import hybrid_config, preview


def test_secrets_of_resources_made_at_once_are_all_kept(monkeypatch):
    """Two generated resources at once, each thread paused where a busy machine may
    pause it: after it read plan.secrets, before it wrote its own back."""
    plan = Plan(project="p", stack="s")
    preview_mocks = engine.PreviewMocks(plan)
    together = threading.Barrier(2, timeout=10)
    original = engine._secret_strings

    def once_the_other_thread_is_here(text: str) -> set[str]:
        together.wait()
        return original(text)

    monkeypatch.setattr(engine, "_secret_strings", once_the_other_thread_is_here)

    def make(name: str) -> dict:
        return preview_mocks.new_resource(mocks.MockResourceArgs(
            typ="random:index/randomBytes:RandomBytes", name=name, inputs={"length": 32}))[1]

    with ThreadPoolExecutor(max_workers=2) as pool:
        made = {name: pool.submit(make, name) for name in ("first", "second")}
    for name, outputs in made.items():
        for output in ("base64", "hex"):
            value = rpc.unwrap_rpc_secret(outputs.result()[output])
            assert value in plan.secrets, f"{name}'s {output} was lost"


def test_every_secret_a_whole_preview_makes_is_known_to_its_plan(monkeypatch):
    """A whole stack, with the time between a thread's read of plan.secrets and its write
    widened as a loaded machine widens it: no generated secret is lost."""
    original = engine._secret_strings

    def slowly(text: str) -> set[str]:
        time.sleep(0.002)  # another thread runs meanwhile
        return original(text)

    monkeypatch.setattr(engine, "_secret_strings", slowly)
    plan = preview(hybrid_config())
    made = [(name, output, generated.outputs[output])
            for (_, name), (_, _, generated) in plan.generated.items()
            for output in generated.secret]
    assert len(made) > 20
    assert [(name, output) for name, output, value in made if value not in plan.secrets] == []
