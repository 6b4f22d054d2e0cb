"""Storage: exactly one default StorageClass, no claim left Pending."""

from doctor.checks import Context, name_of, namespaced, parse_time
from doctor.findings import Finding, ok, problem, warning

# https://kubernetes.io/docs/concepts/storage/storage-classes/#default-storageclass: a class
# is the default when this annotation is "true" (the beta key is still honoured).
DEFAULT_ANNOTATIONS = ("storageclass.kubernetes.io/is-default-class",
                       "storageclass.beta.kubernetes.io/is-default-class")


def is_default(storage_class: dict) -> bool:
    annotations = storage_class["metadata"].get("annotations") or {}
    return any(annotations.get(key) == "true" for key in DEFAULT_ANNOTATIONS)


def default_class(context: Context) -> list[Finding]:
    check = "default-storage-class"
    classes, findings = context.listed(check, "storageclasses")
    if findings:
        return findings
    defaults = sorted(name_of(c) for c in classes if is_default(c))
    wanted = context.stack.default_storage_class
    annotate = ("kubectl patch storageclass {} -p '{{\"metadata\":{{\"annotations\":"
                "{{\"storageclass.kubernetes.io/is-default-class\":\"{}\"}}}}}}'")
    if not defaults:
        return [problem(
            check, "cluster", "no default StorageClass: claims without storageClassName "
            "(Kubeflow's, most charts') stay Pending",
            f"mark the stack's class default: `{annotate.format(wanted, 'true')}`" if wanted
            else "mark one class default with the is-default-class annotation.")]
    if len(defaults) > 1:
        # Since Kubernetes 1.26 the newest default wins: which one a claim gets depends on
        # creation order (the page above).
        keep = wanted if wanted in defaults else defaults[0]
        others = [name for name in defaults if name != keep]
        return [warning(
            check, "cluster", f"{len(defaults)} default StorageClasses: {', '.join(defaults)}; "
            "claims without a class get the most recently created one",
            f"keep one: `{annotate.format(others[0], 'false')}`"
            + (f" (and the same for {', '.join(others[1:])})" if others[1:] else "") + ".")]
    if wanted and defaults != [wanted]:
        return [warning(
            check, f"storageclass {defaults[0]}", f"the default is {defaults[0]}, the stack's "
            f"is {wanted}",
            f"if {defaults[0]} is not meant to be the default: `"
            f"{annotate.format(defaults[0], 'false')}` and `{annotate.format(wanted, 'true')}`.")]
    return [ok(check, f"storageclass {defaults[0]}", "the one default StorageClass")]


def _latest_event(events: list[dict], claim: dict) -> dict:
    metadata = claim["metadata"]
    mine = [e for e in events
            if (e.get("involvedObject") or {}).get("name") == metadata["name"]
            and (e.get("involvedObject") or {}).get("namespace") == metadata.get("namespace")]

    def when(event: dict):
        stamp = (event.get("lastTimestamp") or event.get("eventTime")
                 or (event.get("metadata") or {}).get("creationTimestamp"))
        return parse_time(stamp) or parse_time("1970-01-01T00:00:00Z")

    return max(mine, key=when) if mine else {}


def pending_claims(context: Context) -> list[Finding]:
    check = "pvc-bound"
    claims, findings = context.listed(check, "persistentvolumeclaims")
    if findings:
        return findings
    events = context.snapshot.items("events") or []
    for claim in claims:
        phase = (claim.get("status") or {}).get("phase")
        if phase != "Pending":
            continue
        subject = f"pvc {namespaced(claim)}"
        event = _latest_event(events, claim)
        reason = event.get("reason", "no event")
        if reason == "WaitForFirstConsumer":
            # The class binds when a pod uses the claim (volumeBindingMode): not a failure.
            findings.append(ok(check, subject, "Pending until a pod uses it "
                                               "(WaitForFirstConsumer)"))
            continue
        storage_class = (claim.get("spec") or {}).get("storageClassName")
        message = (event.get("message") or "")[:240]
        findings.append(problem(
            check, subject, f"Pending ({reason}{': ' + message if message else ''})"
            + ("" if storage_class else "; it names no storageClassName"),
            "no class and no default: see default-storage-class." if not storage_class
            else f"the provisioner of class {storage_class} cannot make its volume: check that "
                 "the provisioner's pod runs and the export or volume service it uses is "
                 "reachable; the event above says why."))
    if not findings:
        findings.append(ok(check, "cluster", f"{len(claims)} claims, none Pending"))
    elif "events" in context.snapshot.errors:
        findings.extend(context.missing(check, "events"))
    return findings
