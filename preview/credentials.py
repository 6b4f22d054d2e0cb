"""Real, throwaway credentials for values that only exist after `pulumi up` (the admin
kubeconfig read from the controller, join tokens), so rendered files are real files that
real tools accept. Generated fresh on every run; never valid for any real cluster."""

import base64
import datetime
import secrets

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _name(common_name: str, organization: str = "") -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def _pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def admin_kubeconfig() -> str:
    """A kubeconfig shaped like `k0s kubeconfig admin` prints: a CA and an admin client
    certificate (group system:masters) signed by it."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("kubernetes-ca"))
        .issuer_name(_name("kubernetes-ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = (
        x509.CertificateBuilder()
        .subject_name(_name("admin", "system:masters"))
        .issuer_name(ca.subject)
        .public_key(client_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = client_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return yaml.safe_dump({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": {
            "server": "https://localhost:6443",
            "certificate-authority-data": b64(_pem(ca)),
        }}],
        "contexts": [{"name": "Default", "context": {"cluster": "local", "user": "user"}}],
        "current-context": "Default",
        "users": [{"name": "user", "user": {
            "client-certificate-data": b64(_pem(client)),
            "client-key-data": b64(key_pem),
        }}],
    }, sort_keys=False)


def join_token() -> str:
    return base64.b64encode(secrets.token_bytes(96)).decode()
