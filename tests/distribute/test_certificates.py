"""What `distribute` says of the certificates it hands out, the kubeconfig's client
certificate and the VPN profile's alike (distribute/certificates.py): one row per case,
each through both readers."""

import base64
import datetime

import pytest

from contract.kubeconfig import Handout
from distribute.kubeconfigs import check_credentials
from distribute.vpn import parse_profile
from tests.pki import UTC, Authority, pem


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _kubeconfig_notes(cert_pem: str, key_pem: str, ca_pem: str) -> list[str]:
    document = {
        "clusters": [{"name": "lab", "cluster": {"server": "https://10.0.0.10:6443",
                                                 "certificate-authority-data": _b64(ca_pem)}}],
        "users": [{"name": "lab-alice", "user": {"client-certificate-data": _b64(cert_pem),
                                                 "client-key-data": _b64(key_pem)}}],
        "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "lab-alice"}}]}
    return check_credentials(Handout(document, "lab", "lab-alice", "lab"))


def _profile_notes(cert_pem: str, key_pem: str, ca_pem: str) -> list[str]:
    text = (f"client\nremote 203.0.113.23 1194 udp\n<ca>\n{ca_pem}</ca>\n"
            f"<cert>\n{cert_pem}</cert>\n<key>\n{key_pem}</key>\n")
    return parse_profile(text, "the profile").notes


READERS = {
    "kubeconfig": (_kubeconfig_notes, "client certificate of user 'lab-alice'",
                   "the CA of cluster 'lab'"),
    "vpn": (_profile_notes, "VPN certificate 'alice'", "the profile's CA"),
}


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("days, other_ca, expected", [
    (30, False, ["{what} valid until "]),
    (-1, False, ["warning: the {what} expired on ", ": `pulumi up` renews it"]),
    (30, True, ["warning: the {what} is not signed by {authority}", "{what} valid until "]),
])
def test_notes_say_who_signed_it_and_when_it_ends(reader, days, other_ca, expected):
    read, what, authority = READERS[reader]
    issuer, other = Authority.create(), Authority.create("another-ca")
    now = datetime.datetime.now(UTC)
    # A profile names its holder in the CN; the kubeconfig names it as its user.
    certificate, key = issuer.issue("alice", now - datetime.timedelta(days=365),
                                    now + datetime.timedelta(days=days))
    notes = read(pem(certificate), key, (other if other_ca else issuer).cert_pem)
    text = "\n".join(notes)
    for part in expected:
        assert part.format(what=what, authority=authority) in text, notes
    assert len(notes) == (2 if other_ca else 1), notes
