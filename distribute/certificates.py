"""What `distribute` checks of a certificate it hands out, the kubeconfig's client
certificate as the VPN profile's: that its key is its own, who signed it, when it ends."""

import datetime
from typing import Optional

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization


def key_matches(key, certificate: x509.Certificate) -> bool:
    """Whether private `key` is the one `certificate` certifies."""
    public = serialization.PublicFormat.SubjectPublicKeyInfo
    return (key.public_key().public_bytes(serialization.Encoding.DER, public)
            == certificate.public_key().public_bytes(serialization.Encoding.DER, public))


def notes(certificate: x509.Certificate, what: str, authority_pem: Optional[bytes],
          authority: str) -> list[str]:
    """A warning when `authority_pem` (when given) did not sign `certificate` ("the <what> is
    not signed by <authority>"), and when it ends or that it expired."""
    found = []
    if authority_pem is not None:
        try:
            certificate.verify_directly_issued_by(x509.load_pem_x509_certificate(authority_pem))
        except (ValueError, TypeError, InvalidSignature):
            found.append(f"warning: the {what} is not signed by {authority}")
    expires = certificate.not_valid_after_utc
    if expires <= datetime.datetime.now(datetime.timezone.utc):
        found.append(f"warning: the {what} expired on {expires:%Y-%m-%d}: `pulumi up` renews it")
    else:
        found.append(f"{what} valid until {expires:%Y-%m-%d %H:%M} UTC")
    return found
