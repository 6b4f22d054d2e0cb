"""Nodes: registered, Ready and fresh, none left over, at their configured address."""

import datetime

from contract.names import POOL_LABEL
from doctor.checks import Context, name_of, parse_time
from doctor.findings import Finding, ok, problem, warning

# With node leases the kubelet rewrites its status only every nodeStatusReportFrequency
# (default 5m) when nothing changed (kubernetes/enhancements
# keps/sig-node/0009-node-heartbeat.md; KubeletConfiguration nodeStatusReportFrequency), so
# a heartbeat is stale only well past that.
STALE_AFTER = datetime.timedelta(minutes=15)


def ready_condition(node: dict) -> dict:
    conditions = (node.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "Ready"), {})


def registered(context: Context) -> list[Finding]:
    """Every configured host that runs a kubelet has its Node."""
    check = "node-registered"
    nodes, findings = context.listed(check, "nodes")
    if findings:
        return findings
    names = {name_of(node) for node in nodes}
    for expected in context.stack.nodes:
        subject = f"node {expected.name}"
        if expected.name in names:
            findings.append(ok(check, subject, "registered"))
        elif expected.runs_kubelet:
            findings.append(problem(
                check, subject, f"host {expected.name} ({expected.address}) is configured as a "
                f"{expected.role} but has no Node in the API",
                f"its kubelet never registered or the Node was deleted: look at the worker "
                f"service's log on {expected.name} (journalctl) and rerun `pulumi up`."))
    for pool in context.stack.pools:
        count = sum(1 for node in nodes
                    if (node["metadata"].get("labels") or {}).get(POOL_LABEL) == pool.name)
        subject = f"pool {pool.name}"
        if count < pool.fewest:
            findings.append(warning(
                check, subject, f"{count} of {pool.fewest} nodes registered" if
                pool.fewest == pool.count else f"{count} of at least {pool.fewest} nodes "
                "registered",
                "instances still booting join within minutes; otherwise read the boot status "
                "of the missing instances (SSM, cloud-init log)."))
        else:
            findings.append(ok(check, subject, f"{count} nodes registered"))
    return findings


def readiness(context: Context) -> list[Finding]:
    """Ready is True and its heartbeat recent."""
    check = "node-ready"
    nodes, findings = context.listed(check, "nodes")
    for node in nodes:
        name, condition = name_of(node), ready_condition(node)
        subject = f"node {name}"
        status = condition.get("status", "Unknown")
        since = condition.get("lastTransitionTime", "unknown time")
        if status != "True":
            reason = condition.get("reason") or "no Ready condition"
            message = (condition.get("message") or "")[:200]
            findings.append(problem(
                check, subject, f"Ready is {status} since {since} ({reason}"
                + (f": {message})" if message else ")"),
                f"Unknown means the kubelet on {name} stopped reporting (host down, network, "
                f"kubelet stopped); False names its cause above. Start with the kubelet's log on "
                f"{name}; cordon it (`kubectl cordon {name}`) until it is fixed."))
            continue
        heartbeat = parse_time(condition.get("lastHeartbeatTime"))
        if heartbeat is not None and context.now - heartbeat > STALE_AFTER:
            age = int((context.now - heartbeat).total_seconds() // 60)
            findings.append(warning(
                check, subject, f"Ready is True but its last heartbeat is {age} minutes old",
                "the node controller would have marked it Unknown: check that the control "
                "plane's controller manager runs, and the kubelet's log on the node."))
            continue
        findings.append(ok(check, subject, "Ready"))
    return findings


def left_over(context: Context) -> list[Finding]:
    """Nodes the stack does not know: machines removed without their Node."""
    check = "node-known"
    nodes, findings = context.listed(check, "nodes")
    for node in nodes:
        name = name_of(node)
        pool = (node["metadata"].get("labels") or {}).get(POOL_LABEL)
        if context.stack.node(name) is not None or (pool and context.stack.pool(pool)):
            continue
        status = ready_condition(node).get("status", "Unknown")
        where = f" (labelled pool '{pool}', a pool the stack no longer has)" if pool else ""
        findings.append(warning(
            check, f"node {name}", f"not a host or pool node of {context.stack.source}{where}; "
            f"Ready is {status}",
            f"if its machine is gone, `kubectl drain {name} --ignore-daemonsets` and "
            f"`kubectl delete node {name}`; if it should stay, add it to the stack's hosts."))
    return findings


def internal_ip(context: Context) -> list[Finding]:
    """The InternalIP the kubelet registered is the configured address."""
    check = "node-address"
    nodes, findings = context.listed(check, "nodes")
    for node in nodes:
        expected = context.stack.node(name_of(node))
        if expected is None:
            continue
        addresses = [a.get("address") for a in (node.get("status") or {}).get("addresses") or []
                     if a.get("type") == "InternalIP"]
        subject = f"node {expected.name}"
        if expected.address in addresses:
            findings.append(ok(check, subject, f"InternalIP {expected.address}"))
        else:
            found = ", ".join(addresses) or "none"
            findings.append(problem(
                check, subject, f"InternalIP is {found}, configured address is "
                f"{expected.address}",
                f"the kubelet registered another interface's address, so logs, exec and pod "
                f"traffic take the wrong network: check that {expected.address} is up on the "
                f"configured interface of {expected.name}, then restart its kubelet service."))
    return findings
