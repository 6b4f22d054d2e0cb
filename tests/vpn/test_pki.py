"""VpnPki under the offline preview's mocks, which issue real keys and certificates: the
chain verifies, each certificate may do exactly its job, secrets stay secret, and the
tls-crypt key is a static key OpenVPN reads."""

import datetime
import re
import shutil
import subprocess

import pulumi
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from components.network import vpn_ledger
from components.network.vpn_pki import VpnPki, VpnPkiArgs
from preview.engine import run_program
from preview.plan import Plan
from preview.redaction import REDACTED
from tests.builders import PROJECT_DIR, as_cli_config
from tests.vpn.conftest import HYBRID_VALUES, exported

ROLES = {
    # role: (common name, extended key usage)
    "server": ("lab-vpn-server", ExtendedKeyUsageOID.SERVER_AUTH),
    "gateway": ("lab-onprem-gateway", ExtendedKeyUsageOID.CLIENT_AUTH),
    "admin": ("lab-admin", ExtendedKeyUsageOID.CLIENT_AUTH),
}


@pytest.fixture(scope="module")
def pki_plan() -> Plan:
    def program() -> None:
        pki = VpnPki("lab-vpn-pki", VpnPkiArgs(cluster_name="lab"))
        pulumi.export("ca", pki.ca_cert_pem)
        pulumi.export("tlsCrypt", pki.tls_crypt_key)
        for role in ROLES:
            issued = getattr(pki, role)
            pulumi.export(f"{role}Cert", issued.cert_pem)
            pulumi.export(f"{role}Key", issued.private_key_pem)
            pulumi.export(f"{role}Name", issued.common_name)

    return run_program(PROJECT_DIR, as_cli_config(HYBRID_VALUES), program=program)


def certificate(plan: Plan, name: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(exported(plan, name).encode())


def test_resources_are_named_after_the_component(pki_plan):
    component = pki_plan.named("lab-vpn-pki")
    children = {r.name: r.type for r in pki_plan.resources if r.parent == component.urn}
    expected = {"lab-vpn-pki-ca-key": "tls:index/privateKey:PrivateKey",
                "lab-vpn-pki-ca-cert": "tls:index/selfSignedCert:SelfSignedCert",
                "lab-vpn-pki-tls-crypt-key": "random:index/randomBytes:RandomBytes",
                "lab-vpn-pki-ledger": vpn_ledger.LEDGER_TYPE}
    for role in ROLES:
        expected |= {f"lab-vpn-pki-{role}-key": "tls:index/privateKey:PrivateKey",
                     f"lab-vpn-pki-{role}-csr": "tls:index/certRequest:CertRequest",
                     f"lab-vpn-pki-{role}-cert": "tls:index/locallySignedCert:LocallySignedCert"}
    assert children == expected
    for name, record in pki_plan.by_urn.items():
        if record.type == "tls:index/privateKey:PrivateKey":
            assert record.inputs == {"algorithm": "ECDSA", "ecdsaCurve": "P256"}
    assert pki_plan.named("lab-vpn-pki-tls-crypt-key").inputs == {"length": 256}


def test_the_ca_is_a_ten_year_ca(pki_plan):
    ca = certificate(pki_plan, "ca")
    assert ca.subject == ca.issuer
    assert ca.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "lab-vpn-ca"
    constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.critical and constraints.value.ca
    usage = ca.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.key_cert_sign and usage.crl_sign and not usage.digital_signature
    ca.verify_directly_issued_by(ca)
    lifetime = ca.not_valid_after_utc - ca.not_valid_before_utc
    assert datetime.timedelta(days=3649) <= lifetime <= datetime.timedelta(days=3651)
    assert isinstance(ca.public_key(), ec.EllipticCurvePublicKey)
    assert ca.public_key().curve.name == "secp256r1"


@pytest.mark.parametrize("role", ROLES)
def test_each_certificate_is_signed_by_the_ca_for_its_job(pki_plan, role):
    common_name, purpose = ROLES[role]
    ca, cert = certificate(pki_plan, "ca"), certificate(pki_plan, f"{role}Cert")
    cert.verify_directly_issued_by(ca)
    assert exported(pki_plan, f"{role}Name") == common_name
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == common_name
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [purpose]
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.digital_signature and usage.key_agreement and not usage.key_cert_sign
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert cert.not_valid_after_utc <= ca.not_valid_after_utc
    key = serialization.load_pem_private_key(exported(pki_plan, f"{role}Key").encode(), None)
    assert key.public_key() == cert.public_key()


def test_private_keys_and_the_tls_crypt_key_are_secret(pki_plan):
    for name in ("serverKey", "gatewayKey", "adminKey", "tlsCrypt"):
        value, secret = pki_plan.outputs[name]
        assert secret, name
        assert pki_plan.redact(value) == REDACTED or REDACTED in pki_plan.redact(value)
        # No line of the key survives redaction on its own either.
        for line in value.splitlines():
            if len(line) >= 16 and not line.startswith(("#", "-----")):
                assert pki_plan.redact(line) == REDACTED, (name, line)
    for name in ("ca", "serverCert"):
        assert not pki_plan.outputs[name][1], name


def test_tls_crypt_key_is_an_openvpn_static_key(pki_plan):
    text = exported(pki_plan, "tlsCrypt")
    match = re.search(r"^-----BEGIN OpenVPN Static key V1-----\n((?:[0-9a-f]{32}\n){16})"
                      r"-----END OpenVPN Static key V1-----\n\Z", text, re.M)
    assert match, text
    assert len(bytes.fromhex(match.group(1).replace("\n", ""))) == 256


def test_tls_crypt_key_loads_in_openvpn(pki_plan, tmp_path):
    openvpn = shutil.which("openvpn")
    if openvpn is None:
        pytest.skip("openvpn is not installed (apt-get install openvpn)")
    key = tmp_path / "tls-crypt.key"
    key.write_text(exported(pki_plan, "tlsCrypt"))
    key.chmod(0o600)
    # OpenVPN's own static-key self-test: reads the key file, encrypts and decrypts.
    result = subprocess.run([openvpn, "--test-crypto", "--secret", str(key),
                             "--cipher", "AES-256-CBC", "--verb", "0"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    key.write_text(exported(pki_plan, "tlsCrypt").replace("-----END", "-----END BROKEN"))
    broken = subprocess.run([openvpn, "--test-crypto", "--secret", str(key),
                             "--cipher", "AES-256-CBC", "--verb", "0"],
                            capture_output=True, text=True, timeout=60)
    assert broken.returncode != 0


def test_every_run_issues_fresh_credentials(pki_plan):
    again = run_program(PROJECT_DIR, as_cli_config(HYBRID_VALUES), program=lambda: pulumi.export(
        "ca", VpnPki("lab-vpn-pki", VpnPkiArgs(cluster_name="lab")).ca_cert_pem))
    assert exported(again, "ca") != exported(pki_plan, "ca")
