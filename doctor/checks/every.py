"""Every check, in the order of the report, and running them."""

from doctor.checks import Check, Context
from doctor.checks import (
    control_plane, drift, gpus, hosts, namespaces, nodes, storage, tokens, workloads)
from doctor.findings import Finding, unchecked


def all_checks() -> list[Check]:
    return [nodes.registered, nodes.readiness, nodes.left_over, nodes.internal_ip,
            control_plane.control_plane, gpus.allocatable, gpus.device_plugin_nvml,
            storage.default_class, storage.pending_claims, workloads.mysql_crash_loop,
            namespaces.terminating, tokens.client_certificate, tokens.bootstrap_tokens,
            *hosts.CHECKS, drift.host_drift]


def run(context: Context) -> list[Finding]:
    findings: list[Finding] = []
    for check in all_checks():
        try:
            findings.extend(check(context))
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            # An object of a shape no check expected: said, and the other checks still run.
            name = f"{check.__module__.rsplit('.', 1)[-1]}.{check.__name__}"
            findings.append(unchecked(name, "cluster",
                                      f"unexpected data ({type(error).__name__}: {error})"))
    return findings
