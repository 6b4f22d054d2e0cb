"""Namespaces stuck in Terminating, with what holds them."""

from doctor.checks import Context, name_of
from doctor.findings import Finding, ok, problem

# The namespace controller reports why deletion waits in these conditions
# (k8s.io/api core/v1 types.go NamespaceConditionType; set by
# k8s.io/kubernetes pkg/controller/namespace/deletion/namespaced_resources_deleter.go).
HOLDING_CONDITIONS = ("NamespaceFinalizersRemaining", "NamespaceContentRemaining",
                      "NamespaceDeletionDiscoveryFailure", "NamespaceDeletionContentFailure",
                      "NamespaceDeletionGroupVersionParsingFailure")


def terminating(context: Context) -> list[Finding]:
    check = "namespace-terminating"
    namespaces, findings = context.listed(check, "namespaces")
    if findings:
        return findings
    for namespace in namespaces:
        if (namespace.get("status") or {}).get("phase") != "Terminating":
            continue
        name = name_of(namespace)
        since = namespace["metadata"].get("deletionTimestamp", "an unknown time")
        conditions = [c for c in (namespace.get("status") or {}).get("conditions") or []
                      if c.get("type") in HOLDING_CONDITIONS and c.get("status") == "True"]
        held = "; ".join(f"{c['type']}: {(c.get('message') or '').strip()[:200]}"
                         for c in conditions)
        finalizers = ((namespace.get("spec") or {}).get("finalizers") or []) + \
            (namespace["metadata"].get("finalizers") or [])
        if not held:
            held = (f"finalizers {', '.join(finalizers)}" if finalizers
                    else "no condition says why yet")
        discovery = any(c["type"] == "NamespaceDeletionDiscoveryFailure" for c in conditions)
        fix = ("an APIService is unavailable, so the namespace's content cannot be listed: "
               "`kubectl get apiservice` shows which; fix or delete it."
               if discovery else
               f"the objects named still carry finalizers whose controller is gone (Istio, "
               f"Kubeflow profiles): reinstall that controller, or remove the finalizer from "
               f"each object (`kubectl -n {name} patch <kind>/<name> --type=merge -p "
               "'{\"metadata\":{\"finalizers\":null}}'`).")
        findings.append(problem(check, f"namespace {name}",
                                f"Terminating since {since}: {held}", fix))
    if not findings:
        findings.append(ok(check, "cluster", f"{len(namespaces)} namespaces, none Terminating"))
    return findings
