"""Drift on hosts (doctor/drift.py): each step that can check, in sync with the config or
what drifted, and the way back."""

from doctor.checks import Context
from doctor.drift import EXIT_DRIFTED, EXIT_IN_SYNC, Result, record_name
from doctor.findings import Finding, ok, problem, unchecked
from doctor.hosts import UNREACHABLE

CHECK = "host-drift"


def host_drift(context: Context) -> list[Finding]:
    if context.drift is None:
        return []
    findings = []
    for host, envelopes in sorted(context.drift.envelopes.items()):
        subject = f"host {host}"
        # A host without results (no recorded folder) has only its refusals reported.
        results = context.drift.results.get(host, {})
        expected = context.stack.node(host)
        if UNREACHABLE in results:
            findings.append(unchecked(CHECK, subject, str(results[UNREACHABLE]),
                                      "check SSH access as `pulumi up` uses it."))
            continue
        for envelope in envelopes:
            if envelope.placeholder is not None:
                findings.append(unchecked(
                    CHECK, subject, f"cannot check {envelope.step}: its envelope "
                    f"{envelope.path} has inputs known only at deploy time "
                    f"({envelope.placeholder}), so it is not sent"))
                continue
            if host not in context.drift.results:
                continue
            findings.append(_finding(subject, envelope, results.get(envelope.step),
                                     expected.address if expected else host))
    return findings


def _finding(subject: str, envelope, result, address: str) -> Finding:
    step = envelope.step
    if not isinstance(result, Result):
        return unchecked(CHECK, subject, f"{step}: not collected ({record_name(step)})")
    if result.exit_code == EXIT_IN_SYNC:
        return ok(CHECK, subject, f"{step}: in sync with the config")
    if result.exit_code == EXIT_DRIFTED and result.drift:
        return problem(
            CHECK, subject, f"{step} drifted from the config: " + "; ".join(
                line.strip() for line in result.drift),
            f"re-apply the step as `pulumi up` runs it: ssh {address} sudo -n bash -s -- "
            f"create < {envelope.path} (`pulumi up` re-runs a step only when its script or "
            "inputs change, so it does not undo drift); kernel arguments take effect at the "
            "next reboot.")
    return unchecked(CHECK, subject, f"{step}: its check failed with exit code "
                     f"{result.exit_code}" + (f": {result.error}" if result.error else ""))
