"""The offline preview's stand-in for `gpu-cluster:vpnClientProfile` (vpn.mode
client-to-existing), which it cannot decrypt: a complete OpenVPN client profile with
throwaway keys, so the config checks and the rendered install step see a real profile."""

import datetime
from typing import Optional

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from components.network.openvpn_config import static_key
from preview import entropy
from preview.credentials import sign
from preview.entropy import Draw

# RFC 5737 TEST-NET-1: an address that is never a real server.
PLACEHOLDER_REMOTE = "192.0.2.1"
_SERVER_NAME = "offline-preview-placeholder-server"


def client_profile(draw: Optional[Draw] = None) -> str:
    """A self-contained client profile: CA, client certificate and key, tls-crypt key."""
    draw = draw or entropy.stream("vpn-client-profile")
    ca_key = entropy.ec_key(draw, ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "offline-preview-placeholder-ca")])
    ca = _certificate(ca_name, ca_name, ca_key.public_key(), ca_key, draw, is_ca=True)
    key = entropy.ec_key(draw, ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "offline-preview-placeholder")])
    certificate = _certificate(name, ca_name, key.public_key(), ca_key, draw, is_ca=False)
    blocks = {
        "ca": _pem(ca),
        "cert": _pem(certificate),
        "key": key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption()).decode(),
        "tls-crypt": static_key(draw(256).hex()),
    }
    lines = [
        # No quote characters: the step's shell quoting would change the text, and the
        # preview redacts the profile by its exact text.
        "# Offline preview placeholder, not the profile of this stack (encrypted or not",
        "# set): throwaway keys, a server that does not exist.",
        "client",
        "dev tun",
        "proto udp",
        f"remote {PLACEHOLDER_REMOTE} 1194",
        "nobind",
        "remote-cert-tls server",
        f"verify-x509-name {_SERVER_NAME} name",
        "persist-key",
        "persist-tun",
    ]
    for tag, text in blocks.items():
        lines += [f"<{tag}>", text.strip(), f"</{tag}>"]
    return "\n".join(lines) + "\n"


def _certificate(subject: x509.Name, issuer: x509.Name, public_key, signing_key, draw: Draw,
                 is_ca: bool) -> x509.Certificate:
    now = entropy.now()
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
               .public_key(public_key).serial_number(entropy.serial_number(draw))
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True))
    if is_ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=False, content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
            encipher_only=False, decipher_only=False), critical=True)
    else:
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    return sign(builder, signing_key, hashes.SHA256())


def _pem(certificate: x509.Certificate) -> str:
    return certificate.public_bytes(serialization.Encoding.PEM).decode()
