"""The program's boot user data, from every example stack and the variants below, through
Debian's real cloud-init (tests/boot/cloud_init.py) against the bats suite's stubbed host
(tests/boot/stub_host.py), with S3 and IMDSv2 emulated in the sandbox's network namespace
(tests/boot/aws_emulation.py): the bootstrap fetches the step bundle and the machine's
boot plan with the role the program gives the machine, moto checking each request's
signature and that role's policy; every step of the plan runs, in order, and completes; a
step that fails stops the steps after it; a bundle or plan altered in transit stops the
boot before any step, naming the machine.

The stacks' offline previews are made once, while the tests are collected, so that every
EC2 instance and launch template with user data is a test case of its own."""

from base64 import b64decode, b64encode
from pathlib import Path

import pytest

from components.common.step_text import step_inputs
from tests.boot.boot_cases import (BOOTS, INSTANCE, SSM_TARGETS, SSM_VALUES, TEMPLATE,
                                   boot_status, cloud_config, done, expected_steps, fail_call,
                                   first_call, is_rke2, report, run_boot, ssm_reads, work)
from tests.boot.cloud_init import STAGES
from tests.builders import CI_BUDGET


def test_every_stack_with_boot_user_data_is_covered():
    assert {"dev", "cloud-rke2"} <= {case.stack for case in BOOTS}
    assert {case.resource.type for case in BOOTS} == {INSTANCE, TEMPLATE}


def test_the_user_data_is_the_bootstrap_alone_and_small():
    for case in BOOTS:
        assert case.steps, case.id
        # EC2's limit is 16 KiB gzipped; the bootstrap keeps three quarters of it free.
        assert len(b64decode(case.user_data)) <= 4096, case.id
        assert case.inputs["GPU_CLUSTER_STEP"] == "boot"


@pytest.mark.parametrize("case", BOOTS, ids=lambda case: case.id)
def test_every_step_runs_in_order_and_completes(case, tmp_path):
    steps = case.steps
    assert steps == expected_steps(case)

    run, host, runs = run_boot(case, tmp_path)

    # The first boot fetches the bundle and plan, then runs the steps up to the reboot
    # they need; cloud-init runs the part again at the next boot, which goes on after it.
    first = runs[0]
    rebooted = steps.index("reboot-if-needed") if "reboot-if-needed" in steps else len(steps)
    assert len(runs) == (2 if rebooted < len(steps) else 1), report(first, steps)
    for boot in runs:
        assert [part.text for part in boot.parts] == [case.bootstrap], report(boot, steps)
        assert [part.exit_code for part in boot.parts] == [0], report(boot, steps)
        assert boot.exit_codes == dict.fromkeys(STAGES, 0), report(boot, steps)
    assert run.result["v1"]["errors"] == []
    for later in steps[rebooted + 1:]:
        assert f"gpu-cluster: {case.host}: {later}: " not in first.output, report(first, steps)
    for step in steps[:rebooted + 1] if len(runs) == 2 else []:
        assert f"gpu-cluster: {case.host}: {step}: completed in an earlier boot" in run.output
    for step in steps:
        assert f"gpu-cluster: {case.host}: {step}: {done(case, step)}" in first.output + run.output, step
    # The bundle came from the bucket once, with the machine's role, and is installed.
    requests = [(r["method"], r["path"], r["status"], r["signed"]) for r in first.aws.requests]
    assert requests == [("GET", f"/{case.inputs['BOOT_BUCKET']}/{key}", 200, True)
                        for key in (case.inputs["BOOT_BUNDLE_KEY"], case.inputs["BOOT_PLAN_KEY"])]
    assert (host.root / "var/lib/gpu-cluster/bundles/current").readlink() == Path(
        case.inputs["BOOT_BUNDLE_DIGEST"])
    # Each step's work, step after step.
    calls = host.calls()
    positions = [[first_call(calls, pattern) for pattern in work(case, step)] for step in steps]
    for step, found in zip(steps, positions):
        assert None not in found, f"{step} did not call {work(case, step)}; calls:\n" + \
            "\n".join(calls)
    positions = [found for found in positions if found]
    for earlier, later in zip(positions, positions[1:]):
        assert max(earlier) < min(later), "\n".join(calls)
    # The secrets read from SSM reached their files.
    for name, _, _ in ssm_reads(case):
        target = host.root / SSM_TARGETS[name].lstrip("/")
        assert target.read_text().strip() == SSM_VALUES[name].strip()
    # The #cloud-config part passed cloud-init's schema check and was applied.
    assert "Invalid cloud-config" not in run.log
    wanted = cloud_config(case.user_data).get("hostname")
    if wanted:
        assert run.etc_hostname == wanted
    assert boot_status(case, host) == "ready"


def failures() -> list:
    """Each step but the last on each machine: in CI all; in a developer's run the first
    machine of each distribution that has the step (tests/builders.py CI_BUDGET)."""
    cases, seen = [], set()
    for case in BOOTS:
        for step in case.steps[:-1]:
            kind = (is_rke2(case), step)
            if (work(case, step) or step != "verify-boot") and (CI_BUDGET or kind not in seen):
                seen.add(kind)
                cases.append(pytest.param(case, step, id=f"{case.id}/{step}"))
    return cases


@pytest.mark.parametrize("case,step", failures())
def test_a_failed_step_stops_the_steps_after_it(case, step, tmp_path):
    steps = case.steps
    failed = steps.index(step)

    run, host, _ = run_boot(case, tmp_path, STUB_FAIL_CALL=fail_call(case, step))

    assert [part.exit_code for part in run.parts] == [1], report(run, steps)
    assert (f"gpu-cluster: {case.host}: {step}: FAILED with exit code 1; the later boot steps "
            "will not run") in run.output, report(run, steps)
    calls = host.calls()
    for later in steps[failed + 1:]:
        assert f"gpu-cluster: {case.host}: {later}: boot step started" not in run.output
        for pattern in work(case, later):
            assert first_call(calls, pattern) is None, f"{later} ran: {pattern}"
    for name, target in SSM_TARGETS.items():
        if any(step_inputs(s).get(name) for s in case.scripts[failed + 1:]):
            assert not (host.root / target.lstrip("/")).exists()
    assert run.exit_codes["modules-final"] == 1
    assert "Runparts" in run.result["v1"]["errors"][0]
    assert boot_status(case, host) == f"{step}: failed with exit code 1"


def altered(what: str) -> list:
    """The first machine of each distribution, its bundle or plan altered in transit."""
    return [pytest.param(case, what, id=f"{case.id}/{what}") for case in
            {is_rke2(case): case for case in reversed(BOOTS)}.values()]


@pytest.mark.parametrize("case,what", altered("bundle") + altered("plan"))
def test_a_bundle_or_plan_altered_in_transit_stops_the_boot_naming_the_machine(case, what,
                                                                              tmp_path):
    objects = case.objects()
    key = case.inputs["BOOT_BUNDLE_KEY" if what == "bundle" else "BOOT_PLAN_KEY"]
    if what == "bundle":
        # A file of the tarball changed (the gzip stream no longer gives the same bytes).
        objects[key] = objects[key][:-64] + bytes(64)
    else:
        # One more line: a step the program did not render.
        objects[key] += b"extra " + b64encode(b"touch /tmp/x\n") + b"\n"

    run, host, runs = run_boot(case, tmp_path, objects=objects)

    assert len(runs) == 1
    assert [part.exit_code for part in run.parts] == [1], report(run, case.steps)
    refusal = (f"gpu-cluster: {case.host}: boot: refused: the step bundle received"
               if what == "bundle" else
               f"gpu-cluster: {case.host}: boot: refused: the boot plan s3://")
    assert refusal in run.output, run.output
    # Not one step started, nothing of the bundle was installed.
    assert not [s for s in case.steps if f"{case.host}: {s}: boot step started" in run.output]
    calls = host.calls()
    for step in case.steps:
        for pattern in work(case, step):
            assert first_call(calls, pattern) is None, f"{step} ran: {pattern}"
    if what == "bundle":
        assert not (host.root / "var/lib/gpu-cluster/bundles/current").exists()
