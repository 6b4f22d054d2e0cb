"""Real, throwaway credentials for values that only exist after `pulumi up` (the admin
kubeconfig read from the controller, join tokens, keys and certificates of pulumi_tls and
bytes of pulumi_random), so rendered files are real files that real tools accept.
Generated fresh on every run (or from a seed: preview/entropy.py); never valid for any
real cluster."""

import base64
import datetime
import hashlib
import ipaddress
from dataclasses import dataclass
from typing import Any, Optional

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID, ObjectIdentifier

from preview import entropy
from preview.entropy import Draw


def _pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def ssh_private_key(draw: Optional[Draw] = None) -> str:
    """A throwaway ed25519 key in OpenSSH format."""
    draw = draw or entropy.stream("ssh-private-key")
    return entropy.restamp_openssh(_openssh(entropy.ed25519_key(draw)), draw)


def password_hash(draw: Draw) -> str:
    """A bcrypt hash (cost 4: a placeholder) of a throwaway password; its salt from `draw`."""
    import bcrypt

    salt = base64.b64encode(draw(16)).decode().translate(_BCRYPT_ALPHABET)[:22]
    return bcrypt.hashpw(base64.b64encode(draw(24)), f"$2b$04${salt}".encode()).decode()


_BCRYPT_ALPHABET = str.maketrans(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=",
    "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.")


def join_token(draw: Draw) -> str:
    return base64.b64encode(draw(96)).decode()


def service_account_public_key(draw: Draw) -> str:
    """What service-account-key prints on a controller: an RSA public key (PEM)."""
    return entropy.rsa_key(draw, 2048).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def stand_in_for_certificate(chain_pem: str, draw: Draw) -> tuple[str, str]:
    """(chain, key) for a configured certificate whose key the preview cannot decrypt: a
    throwaway key and, in place of the chain's first certificate, a copy of it (subject,
    names, dates, extensions) signed by that key, so every check but the key's runs on
    the user's own certificate."""
    certificates = x509.load_pem_x509_certificates(chain_pem.encode())
    original = certificates[0]
    key = entropy.ec_key(draw, ec.SECP256R1())
    builder = (x509.CertificateBuilder().subject_name(original.subject)
               .issuer_name(original.subject).public_key(key.public_key())
               .serial_number(original.serial_number)
               .not_valid_before(original.not_valid_before_utc)
               .not_valid_after(original.not_valid_after_utc))
    for extension in original.extensions:
        if not isinstance(extension.value, (x509.SubjectKeyIdentifier,
                                            x509.AuthorityKeyIdentifier)):
            builder = builder.add_extension(extension.value, extension.critical)
    copy = sign(builder, key, hashes.SHA256())
    chain = b"".join(_pem(c) for c in [copy, *certificates[1:]]).decode()
    return chain, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()).decode()


# --- Outputs of pulumi_tls and pulumi_random resources ----------------------------------
# Generated for real from each resource's inputs (camelCase, as the SDK sends them), the
# way the providers would: a certificate signed by a mocked CA verifies against it.


@dataclass(frozen=True)
class Generated:
    """A mocked resource's outputs; `secret` names the ones the provider marks secret;
    `derived` holds text made from them that files show on its own (to redact too)."""

    outputs: dict[str, Any]
    secret: tuple[str, ...] = ()
    derived: tuple[str, ...] = ()


_CURVES = {"P224": ec.SECP224R1, "P256": ec.SECP256R1, "P384": ec.SECP384R1,
           "P521": ec.SECP521R1}
# The hash Go's crypto/x509 signs with for each key (the providers are written in Go).
_CURVE_HASHES = {"secp224r1": hashes.SHA256, "secp256r1": hashes.SHA256,
                 "secp384r1": hashes.SHA384, "secp521r1": hashes.SHA512}
_SUBJECT_FIELDS = {
    "commonName": NameOID.COMMON_NAME, "organization": NameOID.ORGANIZATION_NAME,
    "organizationalUnit": NameOID.ORGANIZATIONAL_UNIT_NAME,
    "streetAddresses": NameOID.STREET_ADDRESS, "locality": NameOID.LOCALITY_NAME,
    "province": NameOID.STATE_OR_PROVINCE_NAME, "country": NameOID.COUNTRY_NAME,
    "postalCode": NameOID.POSTAL_CODE, "serialNumber": NameOID.SERIAL_NUMBER,
    "emailAddress": NameOID.EMAIL_ADDRESS,
}
_KEY_USAGES = ("digital_signature", "content_commitment", "key_encipherment",
               "data_encipherment", "key_agreement", "cert_signing", "crl_signing",
               "encipher_only", "decipher_only")
_EXTENDED_KEY_USAGES = {
    "any_extended": ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE,
    "server_auth": ExtendedKeyUsageOID.SERVER_AUTH,
    "client_auth": ExtendedKeyUsageOID.CLIENT_AUTH,
    "code_signing": ExtendedKeyUsageOID.CODE_SIGNING,
    "email_protection": ExtendedKeyUsageOID.EMAIL_PROTECTION,
    "ipsec_end_system": ObjectIdentifier("1.3.6.1.5.5.7.3.5"),
    "ipsec_tunnel": ObjectIdentifier("1.3.6.1.5.5.7.3.6"),
    "ipsec_user": ObjectIdentifier("1.3.6.1.5.5.7.3.7"),
    "timestamping": ExtendedKeyUsageOID.TIME_STAMPING,
    "ocsp_signing": ExtendedKeyUsageOID.OCSP_SIGNING,
    "microsoft_server_gated_crypto": ObjectIdentifier("1.3.6.1.4.1.311.10.3.3"),
    "netscape_server_gated_crypto": ObjectIdentifier("2.16.840.1.113730.4.1"),
    "microsoft_commercial_code_signing": ObjectIdentifier("1.3.6.1.4.1.311.2.1.22"),
    "microsoft_kernel_code_signing": ObjectIdentifier("1.3.6.1.4.1.311.61.1.1"),
}


def tls_private_key(inputs: dict, draw: Draw) -> Generated:
    """tls.PrivateKey: RSA (rsaBits, default 2048), ECDSA (ecdsaCurve, default P224) or
    ED25519, in the formats the provider outputs."""
    algorithm = inputs.get("algorithm", "")
    if algorithm == "RSA":
        key = entropy.rsa_key(draw, int(inputs.get("rsaBits") or 2048))
    elif algorithm == "ECDSA":
        curve = inputs.get("ecdsaCurve") or "P224"
        if curve not in _CURVES:
            raise ValueError(f"tls.PrivateKey: unsupported ecdsaCurve {curve!r}")
        key = entropy.ec_key(draw, _CURVES[curve]())
    elif algorithm == "ED25519":
        key = entropy.ed25519_key(draw)
    else:
        raise ValueError(f"tls.PrivateKey: unsupported algorithm {algorithm!r}")

    def private(fmt: serialization.PrivateFormat) -> str:
        return key.private_bytes(serialization.Encoding.PEM, fmt,
                                 serialization.NoEncryption()).decode()

    public = key.public_key()
    # OpenSSH has no P224 keys; the provider leaves those outputs empty.
    openssh = not (algorithm == "ECDSA" and inputs.get("ecdsaCurve") in (None, "", "P224"))
    outputs = {
        # PKCS#1 / SEC 1 for RSA and ECDSA, PKCS#8 for Ed25519, like the provider.
        "privateKeyPem": private(serialization.PrivateFormat.PKCS8 if algorithm == "ED25519"
                                 else serialization.PrivateFormat.TraditionalOpenSSL),
        "privateKeyPemPkcs8": private(serialization.PrivateFormat.PKCS8),
        "privateKeyOpenssh": entropy.restamp_openssh(_openssh(key), draw) if openssh else "",
        "publicKeyPem": public.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode(),
        "publicKeyOpenssh": "",
        "publicKeyFingerprintMd5": "",
        "publicKeyFingerprintSha256": "",
    }
    if openssh:
        authorized = public.public_bytes(serialization.Encoding.OpenSSH,
                                         serialization.PublicFormat.OpenSSH)
        blob = base64.b64decode(authorized.split()[1])
        md5 = hashlib.md5(blob, usedforsecurity=False).hexdigest()
        outputs["publicKeyOpenssh"] = authorized.decode() + "\n"
        outputs["publicKeyFingerprintMd5"] = ":".join(md5[i:i + 2] for i in range(0, 32, 2))
        outputs["publicKeyFingerprintSha256"] = "SHA256:" + base64.b64encode(
            hashlib.sha256(blob).digest()).decode().rstrip("=")
    return Generated(outputs, secret=("privateKeyPem", "privateKeyPemPkcs8", "privateKeyOpenssh"))


def tls_self_signed_cert(inputs: dict, draw: Draw) -> Generated:
    """tls.SelfSignedCert: the subject, SANs, validity and allowed uses of its inputs,
    signed by its own key."""
    key = _load_private_key(inputs["privateKeyPem"])
    subject = _subject(inputs.get("subject"))
    builder = _certificate_builder(inputs, subject, subject, key.public_key(), draw)
    builder = _add_alternative_names(builder, inputs)
    if inputs.get("setAuthorityKeyId"):
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(key.public_key()), critical=False)
    certificate = sign(builder, key, _signature_hash(key))
    return Generated(_certificate_outputs(certificate, inputs, "keyAlgorithm", key))


def tls_cert_request(inputs: dict, draw: Draw) -> Generated:
    """tls.CertRequest: a PKCS#10 request for the subject and SANs, signed by the key."""
    key = _load_private_key(inputs["privateKeyPem"])
    builder = x509.CertificateSigningRequestBuilder().subject_name(
        _subject(inputs.get("subject")))
    alternative_names = _alternative_names(inputs)
    if alternative_names:
        builder = builder.add_extension(x509.SubjectAlternativeName(alternative_names),
                                        critical=False)
    request = sign(builder, key, _signature_hash(key))
    return Generated({
        "certRequestPem": request.public_bytes(serialization.Encoding.PEM).decode(),
        "keyAlgorithm": _algorithm(key),
    })


def tls_locally_signed_cert(inputs: dict, draw: Draw) -> Generated:
    """tls.LocallySignedCert: the request's subject and SANs, issued by the CA whose key
    and certificate are among the inputs, with the inputs' validity and allowed uses."""
    request = x509.load_pem_x509_csr(inputs["certRequestPem"].encode())
    ca_key = _load_private_key(inputs["caPrivateKeyPem"])
    ca = x509.load_pem_x509_certificate(inputs["caCertPem"].encode())
    if ca.public_key().public_bytes(serialization.Encoding.DER,
                                    serialization.PublicFormat.SubjectPublicKeyInfo) != \
            ca_key.public_key().public_bytes(serialization.Encoding.DER,
                                             serialization.PublicFormat.SubjectPublicKeyInfo):
        raise ValueError("tls.LocallySignedCert: caPrivateKeyPem is not the key of caCertPem")
    builder = _certificate_builder(inputs, request.subject, ca.subject, request.public_key(),
                                   draw)
    try:
        names = request.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        builder = builder.add_extension(names.value, critical=False)
    except x509.ExtensionNotFound:
        pass
    try:
        ca_key_id = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_key_id.value),
            critical=False)
    except x509.ExtensionNotFound:
        pass
    certificate = sign(builder, ca_key, _signature_hash(ca_key))
    return Generated(_certificate_outputs(certificate, inputs, "caKeyAlgorithm", ca_key))


def random_bytes(inputs: dict, draw: Draw) -> Generated:
    """random.RandomBytes: `length` random bytes as base64 and hex."""
    data = draw(int(inputs["length"]))
    encoded, hexed = base64.b64encode(data).decode(), data.hex()
    # Key files wrap them: OpenVPN static keys in lines of 32 hex digits, PEM in 64.
    lines = [hexed[i:i + 32] for i in range(0, len(hexed), 32)]
    lines += [encoded[i:i + 64] for i in range(0, len(encoded), 64)]
    return Generated({"base64": encoded, "hex": hexed}, secret=("base64", "hex"),
                     derived=tuple(lines))


def random_id(inputs: dict, draw: Draw) -> Generated:
    """random.RandomId: `byteLength` random bytes as hex and base64 (not secret)."""
    data = draw(int(inputs["byteLength"]))
    url = base64.urlsafe_b64encode(data).decode().rstrip("=")
    return Generated({"hex": data.hex(), "b64Std": base64.b64encode(data).decode(),
                      "b64Url": url, "dec": str(int.from_bytes(data, "big"))})


def sign(builder, key, algorithm):
    """Signs a certificate or request; ECDSA deterministically (RFC 6979), so the same key
    and contents give the same signature."""
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return builder.sign(key, algorithm, ecdsa_deterministic=True)
    return builder.sign(key, algorithm)


def _openssh(key) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                             serialization.NoEncryption()).decode()


def _load_private_key(pem: str):
    return serialization.load_pem_private_key(pem.encode(), password=None)


def _algorithm(key) -> str:
    if isinstance(key, rsa.RSAPrivateKey):
        return "RSA"
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return "ECDSA"
    return "ED25519"


def _signature_hash(key):
    if isinstance(key, rsa.RSAPrivateKey):
        return hashes.SHA256()
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return _CURVE_HASHES[key.curve.name]()
    return None  # Ed25519 signs without a separate hash


def _subject(subject: Optional[dict]) -> x509.Name:
    attributes = []
    for field, oid in _SUBJECT_FIELDS.items():
        value = (subject or {}).get(field)
        for item in value if isinstance(value, list) else [value]:
            if item:
                attributes.append(x509.NameAttribute(oid, str(item)))
    return x509.Name(attributes)


def _alternative_names(inputs: dict) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = [x509.DNSName(n) for n in inputs.get("dnsNames") or []]
    names += [x509.IPAddress(ipaddress.ip_address(a)) for a in inputs.get("ipAddresses") or []]
    names += [x509.UniformResourceIdentifier(u) for u in inputs.get("uris") or []]
    return names


def _add_alternative_names(builder: x509.CertificateBuilder, inputs: dict):
    names = _alternative_names(inputs)
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder


def _certificate_builder(inputs: dict, subject: x509.Name, issuer: x509.Name,
                         public_key, draw: Draw) -> x509.CertificateBuilder:
    """Validity from now, basic constraints, key usages (critical) and extended key usages,
    as the provider sets them; a CA also gets a subject key identifier (Go adds one)."""
    uses = list(inputs.get("allowedUses") or [])
    unknown = [u for u in uses if u not in _KEY_USAGES and u not in _EXTENDED_KEY_USAGES]
    if unknown:
        raise ValueError(f"tls certificate: unknown allowedUses {unknown}")
    is_ca = bool(inputs.get("isCaCertificate"))
    now = entropy.now()
    max_path_length = inputs.get("maxPathLength")
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(entropy.serial_number(draw))
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(hours=int(inputs["validityPeriodHours"])))
        .add_extension(x509.BasicConstraints(
            ca=is_ca, path_length=int(max_path_length) if is_ca and max_path_length else None),
            critical=True)
    )
    key_usages = {use: use in uses for use in _KEY_USAGES}
    if any(key_usages.values()):
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=key_usages["digital_signature"],
            content_commitment=key_usages["content_commitment"],
            key_encipherment=key_usages["key_encipherment"],
            data_encipherment=key_usages["data_encipherment"],
            key_agreement=key_usages["key_agreement"],
            key_cert_sign=key_usages["cert_signing"],
            crl_sign=key_usages["crl_signing"],
            encipher_only=key_usages["encipher_only"],
            decipher_only=key_usages["decipher_only"],
        ), critical=True)
    extended = [_EXTENDED_KEY_USAGES[use] for use in uses if use in _EXTENDED_KEY_USAGES]
    if extended:
        builder = builder.add_extension(x509.ExtendedKeyUsage(extended), critical=False)
    if is_ca or inputs.get("setSubjectKeyId"):
        builder = builder.add_extension(
            x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
    return builder


def _certificate_outputs(certificate: x509.Certificate, inputs: dict, algorithm_output: str,
                         signing_key) -> dict[str, Any]:
    def rfc3339(moment: datetime.datetime) -> str:
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")

    return {
        "certPem": _pem(certificate).decode(),
        algorithm_output: _algorithm(signing_key),
        "validityStartTime": rfc3339(certificate.not_valid_before_utc),
        "validityEndTime": rfc3339(certificate.not_valid_after_utc),
        "readyForRenewal": False,
        "earlyRenewalHours": inputs.get("earlyRenewalHours", 0),
    }
