"""What two previews of a stack say about its remote steps, for the upgrade tests: which
steps run again (their stdin differs) and what each waits for."""

import re


def step_stdins(plan) -> dict[str, str]:
    # Tokens, the CA and generated secrets are fresh per preview: compare the rest.
    return {r.name: re.sub(r"(TOKEN|CA_CERT|CA_KEY)='[^']*'", "", plan.redact(r.inputs["stdin"]))
            for r in plan.of_type("command:remote:Command")}


def changed_steps(before, after) -> set[str]:
    a, b = step_stdins(before), step_stdins(after)
    assert set(a) == set(b)
    return {name for name in a if a[name] != b[name]}


# Every step on a machine waits for its bundle step (test_bare_metal_stack.py
# test_every_step_waits_for_its_machines_bundle); the order tests look past it.
BUNDLE_STEP = "-install-bundle"


def waits_for(plan, name: str) -> set[str]:
    """What a resource waits for, but the bundle step of the machine it runs on."""
    return {plan.by_urn[d].name for d in plan.custom_dependencies(plan.named(name))
            if not plan.by_urn[d].name.endswith(BUNDLE_STEP)}


def boot_steps(plan, resource) -> list[str]:
    """The steps an EC2 instance's or launch template's user data runs at boot, in order,
    each rendered whole (the bundle's files it runs pasted in)."""
    from components.common.step_text import whole_text

    data = resource.inputs.get("userData") or resource.inputs.get("userDataBase64")
    return [whole_text(stdin) for _, stdin in plan.boot_steps(data)]


def boot_step(plan, resource, step: str) -> dict[str, str]:
    """The inputs of the boot step named `step` (its GPU_CLUSTER_STEP), wherever the plan puts
    it among the others."""
    from components.common.step_text import step_inputs

    [inputs] = [inputs for inputs in map(step_inputs, boot_steps(plan, resource))
                if inputs.get("GPU_CLUSTER_STEP") == step]
    return inputs
