"""Workloads users trip over: Katib's and Pipelines' MySQL crash-looping."""

from doctor.checks import Context, name_of, namespaced
from doctor.findings import Finding, ok, problem, warning

# Restarts of a running container worth a word (it crashed and came back).
RESTARTS_WARNING = 3
WAITING_PROBLEMS = ("CrashLoopBackOff", "CreateContainerConfigError", "ImagePullBackOff",
                    "ErrImagePull", "RunContainerError")


def is_mysql(pod: dict) -> bool:
    labels = pod["metadata"].get("labels") or {}
    return ("mysql" in name_of(pod)
            or any("mysql" in str(labels.get(key, ""))
                   for key in ("app", "app.kubernetes.io/name", "component")))


def mysql_crash_loop(context: Context) -> list[Finding]:
    check = "mysql"
    pods, findings = context.listed(check, "pods")
    if findings:
        return findings
    for pod in filter(is_mysql, pods):
        subject = f"pod {namespaced(pod)}"
        node = (pod.get("spec") or {}).get("nodeName", "no node")
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        restarts = sum(s.get("restartCount", 0) for s in statuses)
        waiting = [(s["name"], (s.get("state") or {}).get("waiting") or {}) for s in statuses]
        stuck = [(name, w) for name, w in waiting if w.get("reason") in WAITING_PROBLEMS]
        last = next(((s.get("lastState") or {}).get("terminated") for s in statuses
                     if (s.get("lastState") or {}).get("terminated")), None) or {}
        died = (f"; last exit {last.get('reason', '?')} (code {last.get('exitCode', '?')})"
                if last else "")
        logs = (f"`kubectl -n {pod['metadata']['namespace']} logs {name_of(pod)} --previous` "
                "says why")
        if stuck:
            container, state = stuck[0]
            findings.append(problem(
                check, subject, f"container {container} is {state['reason']} on node {node}, "
                f"{restarts} restarts{died}",
                f"{logs}: a data directory from another MySQL version or not empty (lost+found), "
                "a volume it cannot write, or OOMKilled (raise its memory limit)."))
        elif restarts >= RESTARTS_WARNING:
            findings.append(warning(
                check, subject, f"running on node {node} after {restarts} restarts{died}",
                f"{logs}; it recovered for now."))
        else:
            findings.append(ok(check, subject, f"running on node {node}, {restarts} restarts"))
    return findings
