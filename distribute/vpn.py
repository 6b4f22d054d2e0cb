"""The OpenVPN profile (.ovpn) the program issues a user on hybrid stacks: a client config
with its CA, certificate, key and tls-crypt key inline (components/network/openvpn_config.py
admin_profile), checked before it is written beside the kubeconfig."""

import re
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import NameOID

from distribute import InputError, certificates

# Inline files: `<ca>`...`</ca>`, as openvpn(8) "INLINE FILE SUPPORT" describes them.
_BLOCK = re.compile(r"^<(?P<tag>[a-z-]+)>\n(?P<body>.*?)^</(?P=tag)>$", re.M | re.S)
REQUIRED_BLOCKS = ("ca", "cert", "key")


@dataclass
class Profile:
    text: str
    # "203.0.113.23 1194 udp": where the client connects.
    remote: str
    common_name: str
    notes: list


def parse_profile(text: str, what: str) -> Profile:
    """The profile's server and certificate; raises when it cannot connect as is (not a
    client config, a credential missing, or a key that is not the certificate's)."""
    blocks = {match["tag"]: match["body"] for match in _BLOCK.finditer(text)}
    outside = _BLOCK.sub("", text)
    directives = [line.split() for line in outside.splitlines()
                  if line.strip() and not line.lstrip().startswith(("#", ";"))]
    if ["client"] not in directives:
        raise InputError(f"{what} is not an OpenVPN client profile (no 'client' directive)")
    remotes = [" ".join(words[1:]) for words in directives if words[0] == "remote"]
    missing = [tag for tag in REQUIRED_BLOCKS if tag not in blocks]
    if not remotes or missing:
        raise InputError(f"{what} is not a self-contained OpenVPN profile (missing: "
                         f"{', '.join((['remote'] if not remotes else []) + missing)})")
    try:
        certificate = x509.load_pem_x509_certificate(blocks["cert"].encode())
        x509.load_pem_x509_certificate(blocks["ca"].encode())  # PEM? (notes reads it again)
        key = serialization.load_pem_private_key(blocks["key"].encode(), password=None)
    except (ValueError, TypeError):
        raise InputError(f"{what}: its <ca>, <cert> or <key> is not PEM (an unencrypted key "
                         "is expected)") from None
    if not certificates.key_matches(key, certificate):
        raise InputError(f"{what}: the key does not belong to the certificate")
    names = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    common_name = str(names[0].value) if names else "(no common name)"
    notes = certificates.notes(certificate, f"VPN certificate '{common_name}'",
                               blocks["ca"].encode(), "the profile's CA")
    return Profile(text, remotes[0], common_name, notes)
