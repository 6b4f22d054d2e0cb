"""What the VPN's CAs have issued to clients and what they revoked, kept in the stack's
state, and the revocation lists (CRLs) the server checks.

A user removed from config, or a certificate replaced (renewed, or re-issued with a new
key), leaves no resource behind to say its serial: the ledger remembers it. It is a
dynamic resource whose `update` gets its own earlier outputs (`olds`) and the clients'
current certificates, and returns the new record (the pure function `record`): a
certificate that is gone or replaced moves to `revoked` while its CA is trusted and it has
not expired (RFC 5280 5.1.2.6: an entry may be removed once the certificate has expired).
One exception: a certificate replaced by one of a newer generation stays valid while the
previous CA is trusted (vpn.previousCaTrusted, the rotation's window), and is revoked if
its holder is removed meanwhile.

Dates come from rounds so that a `pulumi up` changes nothing between two rounds (the
signatures are deterministic, RFC 6979): client and server certificates are re-issued
every RENEWAL_ROUND_DAYS (vpn_pki.py), the CRL is re-signed every CRL_PERIOD_DAYS.
"""

import datetime
from typing import Any, Optional

import pulumi
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from pulumi import dynamic

# Rounds count from here (UTC days).
EPOCH = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
CERT_VALIDITY_DAYS = 365
# Certificates get new keys and certificates at the first `pulumi up` of every round: one
# issued in round n expires at the earliest 365 days after round n started, and round n+1
# starts 300 days after it, so they are renewed at least 65 days before they expire.
RENEWAL_ROUND_DAYS = 300
# The CRL is signed anew at the first `pulumi up` of every 30-day period and is valid for
# 180 days. OpenVPN refuses every client once it has expired: of the CRL errors it ignores
# only a missing CRL (OpenVPN/openvpn src/openvpn/ssl_verify_openssl.c:80,
# X509_V_ERR_UNABLE_TO_GET_CRL), so CRL_HAS_EXPIRED fails every verification.
CRL_PERIOD_DAYS = 30
CRL_VALIDITY_DAYS = 180
# The type the engine records: pulumi-python:dynamic/<module>:<name>.
LEDGER_TYPE = "pulumi-python:dynamic/gpu-cluster:VpnCertificateLedger"


def rounds_since_epoch(moment: datetime.datetime, days: int) -> int:
    return max(0, (moment - EPOCH).days // days)


def round_start(index: int, days: int) -> datetime.datetime:
    return EPOCH + datetime.timedelta(days=index * days)


def crl_window(moment: datetime.datetime) -> tuple[datetime.datetime, datetime.datetime]:
    """thisUpdate and nextUpdate of a CRL signed at `moment`."""
    start = round_start(rounds_since_epoch(moment, CRL_PERIOD_DAYS), CRL_PERIOD_DAYS)
    return start, start + datetime.timedelta(days=CRL_VALIDITY_DAYS)


def rfc3339(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def certificate_facts(cert_pem: str, generation: int) -> dict:
    """What the ledger keeps of a certificate: its serial (decimal, as OpenVPN logs it),
    when it expires and which generation's CA issued it."""
    certificate = x509.load_pem_x509_certificate(cert_pem.encode())
    return {"serial": str(certificate.serial_number),
            "notAfter": rfc3339(certificate.not_valid_after_utc), "generation": generation}


def record(previous: Optional[dict], current: dict[str, dict], trusted: list[int],
           now: str) -> dict:
    """The ledger after this run: `issued` (holder -> its live certificates, the current
    one first) and `revoked` (sorted by serial). `previous` is the earlier record (None at
    creation), `current` each holder's certificate now, `trusted` the generations whose
    CA the server trusts, `now` the CRL's thisUpdate (RFC 3339: compared as text)."""
    previous = previous or {}
    revoked = {entry["serial"]: entry for entry in previous.get("revoked") or []}
    issued = {name: [entry] for name, entry in current.items()}
    for name, entries in (previous.get("issued") or {}).items():
        now_held = current.get(name)
        for entry in entries:
            if now_held is not None and entry["serial"] == now_held["serial"]:
                continue
            if now_held is not None and entry["generation"] < now_held["generation"] \
                    and entry["generation"] in trusted:
                issued[name].append(entry)  # the rotation's window
            else:
                revoked[entry["serial"]] = {**entry, "holder": name}
    return {
        "issued": issued,
        "revoked": sorted((entry for entry in revoked.values()
                           if entry["generation"] in trusted and entry["notAfter"] > now),
                          key=lambda entry: int(entry["serial"])),
    }


def outputs(inputs: dict, olds: Optional[dict]) -> dict:
    """The resource's outputs: its inputs and the record (create: olds is None)."""
    kept = {key: value for key, value in inputs.items() if not key.startswith("__")}
    return {**kept, **record(olds, inputs["current"], inputs["trusted"], inputs["now"])}


class _LedgerProvider(dynamic.ResourceProvider):
    """Runs in the engine's dynamic provider process (`python -m pulumi.dynamic` from
    the project folder, which puts it on sys.path); state is only ever its own outputs."""

    def create(self, props: dict[str, Any]) -> dynamic.CreateResult:
        return dynamic.CreateResult("vpn-certificate-ledger", outputs(props, None))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> dynamic.DiffResult:
        changed = [key for key in ("current", "trusted", "now") if olds.get(key) != news.get(key)]
        return dynamic.DiffResult(changes=bool(changed), replaces=[], delete_before_replace=False)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]
               ) -> dynamic.UpdateResult:
        return dynamic.UpdateResult(outputs(news, olds))


class CertificateLedger(dynamic.Resource, module="gpu-cluster", name="VpnCertificateLedger"):
    revoked: pulumi.Output[list]

    def __init__(self, name: str, current: pulumi.Input[dict], trusted: list[int], now: str,
                 opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(_LedgerProvider(), name, {
            "current": current, "trusted": trusted, "now": now,
            "issued": None, "revoked": None}, opts)


def crl_pem(ca_key_pem: str, ca_cert_pem: str, revoked: list[dict], generation: int,
            moment: datetime.datetime) -> str:
    """The CRL of one CA: the revoked entries it issued, signed deterministically."""
    ca_key = serialization.load_pem_private_key(ca_key_pem.encode(), password=None)
    ca = x509.load_pem_x509_certificate(ca_cert_pem.encode())
    this_update, next_update = crl_window(moment)
    builder = (x509.CertificateRevocationListBuilder().issuer_name(ca.subject)
               .last_update(this_update).next_update(next_update))
    for entry in revoked:
        if entry["generation"] != generation:
            continue
        builder = builder.add_revoked_certificate(
            x509.RevokedCertificateBuilder().serial_number(int(entry["serial"]))
            .revocation_date(this_update).build())
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the VPN's CA keys are ECDSA")
    crl = builder.sign(ca_key, hashes.SHA256(), ecdsa_deterministic=True)
    return crl.public_bytes(serialization.Encoding.PEM).decode()
