"""Prints a step of one host of a stack as the program renders it, whole (the bundle's files
it runs pasted in), for the bats tests: `render_host_step.py STACK_JSON HOST STEP`. The stack
is previewed offline (tests/builders.py preview); STACK_JSON is its config values, with
"sshPrivateKey" and each host's "sshHostKey" filled in when left out. Fails when the
program makes no such step."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from components.common.step_text import whole_text  # noqa: E402
from preview.engine import unwrap_secrets  # noqa: E402
from tests.builders import TEST_HOST_KEY, TEST_PRIVATE_KEY, preview  # noqa: E402


def main(stack_json: str, host: str, step: str) -> None:
    values = json.loads(stack_json)
    values.setdefault("sshPrivateKey", TEST_PRIVATE_KEY)
    for entry in values.get("hosts", []):
        entry.setdefault("sshHostKey", TEST_HOST_KEY)
    plan = preview(values, stack="bats")
    steps = {r.name: r for r in plan.of_type("command:remote:Command")}
    if f"{host}-{step}" not in steps:
        sys.exit(f"the program makes no {step} step for {host} "
                 f"(its steps: {', '.join(sorted(n for n in steps if n.startswith(host)))})")
    sys.stdout.write(whole_text(unwrap_secrets(steps[f"{host}-{step}"].inputs["stdin"])))


if __name__ == "__main__":
    main(*sys.argv[1:])
