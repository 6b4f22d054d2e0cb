"""A cluster CA and certificates of any validity signed by it, made with `cryptography`: the
doctor's, validate's and distribute's tests' clusters."""

import datetime
import ipaddress
from dataclasses import dataclass
from typing import Optional

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

UTC = datetime.timezone.utc


def _name(common_name: str, organization: Optional[str] = None) -> x509.Name:
    parts = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        parts.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(parts)


def pem(certificate: x509.Certificate) -> str:
    return certificate.public_bytes(serialization.Encoding.PEM).decode()


def key_pem(key) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


@dataclass
class Authority:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @classmethod
    def create(cls, common_name: str = "kubernetes-ca") -> "Authority":
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(UTC)
        cert = (x509.CertificateBuilder().subject_name(_name(common_name))
                .issuer_name(_name(common_name)).public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(days=1))
                .not_valid_after(now + datetime.timedelta(days=3650))
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(False, False, False, False, False, True, True,
                                             False, False), critical=True)
                .sign(key, hashes.SHA256()))
        return cls(cert, key)

    @property
    def cert_pem(self) -> str:
        return pem(self.cert)

    def issue(self, common_name: str, not_before: datetime.datetime,
              not_after: datetime.datetime, organization: Optional[str] = None,
              server_ip: Optional[str] = None) -> tuple[x509.Certificate, str]:
        """(certificate, private key PEM): a client certificate, or a server certificate
        for `server_ip`."""
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (x509.CertificateBuilder().subject_name(_name(common_name, organization))
                   .issuer_name(self.cert.subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(not_before).not_valid_after(not_after))
        if server_ip:
            builder = (builder.add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address(server_ip))]), critical=False)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                               critical=False))
        else:
            builder = builder.add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        return builder.sign(self.key, hashes.SHA256()), key_pem(key)

    def client(self, days: float) -> tuple[x509.Certificate, str]:
        """The admin's client certificate, valid `days` more days (negative: expired)."""
        now = datetime.datetime.now(UTC)
        end = now + datetime.timedelta(days=days)
        return self.issue("admin", min(now, end) - datetime.timedelta(days=365), end,
                          organization="system:masters")

    def user(self, name: str, group: str, days: int = 365) -> tuple[str, str]:
        """(certificate PEM, private key PEM) of user `name` of `group`, valid `days`."""
        now = datetime.datetime.now(UTC)
        cert, key = self.issue(name, now - datetime.timedelta(minutes=5),
                               now + datetime.timedelta(days=days), organization=group)
        return pem(cert), key
