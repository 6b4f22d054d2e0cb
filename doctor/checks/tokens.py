"""Credentials: the admin's client certificate near expiry; bootstrap join tokens left in
the cluster."""

import base64
import binascii
import datetime

from doctor.checks import Context, name_of, parse_time
from doctor.findings import Finding, ok, problem, warning

# The program renews client certificates on the `pulumi up` within 30 days of their end
# (components/kubernetes/pki.py CLIENT_CERT_EARLY_RENEWAL_HOURS): warn from then on.
RENEW_WITHIN = datetime.timedelta(days=30)


def client_certificate(context: Context) -> list[Finding]:
    check = "certificate-expiry"
    findings = []
    for what, certificate in (("admin client certificate", context.snapshot.client_certificate),
                              ("cluster CA certificate", context.snapshot.ca_certificate)):
        if certificate is None:
            continue
        subject = f"{what} ({certificate.subject.rfc4514_string()[:80]})"
        ends = certificate.not_valid_after_utc
        left = ends - context.now
        if left <= datetime.timedelta(0):
            findings.append(problem(
                check, subject, f"expired on {ends:%Y-%m-%d %H:%M} UTC",
                "the API refuses it: `pulumi up` issues a new one; then hand out the "
                "kubeconfig again (`python -m distribute write --admin ...`)."
                if what.startswith("admin") else
                "every certificate it signed stops working: the CA must be replaced."))
        elif left < RENEW_WITHIN:
            findings.append(warning(
                check, subject, f"expires in {left.days} days ({ends:%Y-%m-%d} UTC)",
                "`pulumi up` renews it now (within 30 days of its end); then hand out the "
                "kubeconfig again." if what.startswith("admin") else
                "plan the CA's replacement before it ends."))
        else:
            findings.append(ok(check, subject, f"valid until {ends:%Y-%m-%d} UTC "
                                               f"({left.days} days)"))
    return findings


def _field(secret: dict, key: str) -> str:
    value = (secret.get("data") or {}).get(key)
    if value is None:
        return (secret.get("stringData") or {}).get(key, "")
    try:
        return base64.b64decode(value).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return ""


def bootstrap_tokens(context: Context) -> list[Finding]:
    """Join tokens are bearer credentials that let a machine register as a node
    (https://kubernetes.io/docs/reference/access-authn-authz/bootstrap-tokens/); expired ones
    stay until the TokenCleaner controller, off by default, removes them."""
    check = "join-tokens"
    secrets, findings = context.listed(check, "bootstrap-tokens")
    if findings:
        return findings
    pools = bool(context.stack.pools)
    for secret in secrets:
        name = name_of(secret)
        # The token id is public (the name says it); the secret half is never read out.
        subject = f"secret kube-system/{name}"
        delete = f"`kubectl -n kube-system delete secret {name}`"
        expires = parse_time(_field(secret, "expiration") or None)
        if expires is None:
            findings.append(warning(
                check, subject, "a join token that never expires",
                f"anyone holding it can register a node: {delete} once no host joins with it."))
        elif expires <= context.now:
            findings.append(warning(
                check, subject, f"expired on {expires:%Y-%m-%d %H:%M} UTC, still stored",
                f"it no longer works; {delete}."))
        elif pools:
            findings.append(ok(check, subject, f"valid until {expires:%Y-%m-%d %H:%M} UTC "
                                               "(pool instances join with a token)"))
        else:
            findings.append(warning(
                check, subject, f"valid until {expires:%Y-%m-%d %H:%M} UTC; the stack has no "
                "pool that joins with it",
                f"a left-over join credential: {delete} (`pulumi up` makes a new one for a "
                "new host)."))
    if not secrets:
        findings.append(ok(check, "cluster", "no bootstrap tokens stored"))
    return findings
