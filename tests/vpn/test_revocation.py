"""The VPN's ledger and CRLs: what a `pulumi up` after another revokes (a user removed from
config, certificates renewed at a new round, a rotation), checked by OpenSSL's own
`openssl verify -crl_check` (what OpenVPN's crl-verify does: X509_V_FLAG_CRL_CHECK,
OpenVPN/openvpn src/openvpn/ssl_openssl.c backend_tls_ctx_reload_crl), and the ledger's
rules on their own."""

import datetime
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509

from components.network import vpn_ledger
from preview import entropy
from preview.plan import Plan
from tests.builders import PROJECT_DIR
from tests.vpn.conftest import SERVER, build_plan, exported, hybrid_values, plain, stdin_of
from tests.vpn.test_vpn_bridge import exports

SERVER_STEP = f"{SERVER.name}-install-openvpn-server"
ACCESS = {"teams": [{"name": "vision"}],
          "users": [{"name": "alice", "namespaces": ["vision"]},
                    {"name": "bob", "namespaces": ["vision"]}]}
# Ten days into round 0; the next CRL period starts on day 30, round 1 on day 300.
DAY_10 = vpn_ledger.EPOCH + datetime.timedelta(days=10)


def stack(users=("alice", "bob"), **vpn) -> dict:
    values = hybrid_values(**vpn)
    values["access"] = {**ACCESS, "users": [u for u in ACCESS["users"] if u["name"] in users]}
    return values


def plan_at(monkeypatch, moment: datetime.datetime, values: dict,
            earlier: Plan = None) -> Plan:
    # The preview's clock is the program's (preview/engine.py run_program).
    monkeypatch.setattr(entropy, "now", lambda: moment)
    return build_plan(values, earlier=earlier)


def profile_cert(plan: Plan, user: str) -> str:
    profile = exported(plan, "userProfiles")[user]
    return profile.split("<cert>\n", 1)[1].split("</cert>", 1)[0]


def admin_cert(plan: Plan) -> str:
    return exported(plan, "adminProfile").split("<cert>\n", 1)[1].split("</cert>", 1)[0]


def server_env(plan: Plan) -> dict:
    return exports(stdin_of(plan, SERVER_STEP))


def openssl_verify(tmp_path: Path, plan: Plan, cert_pem: str,
                   at: datetime.datetime = DAY_10) -> str:
    """`openssl verify -crl_check` of a client certificate against the server's CA file
    and CRL file, as they are installed, on the day `at` (the CRL expires)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed")
    env = server_env(plan)
    for name, text in (("ca.pem", env["OPENVPN_CA"]), ("crl.pem", env["OPENVPN_CRL"]),
                       ("cert.pem", cert_pem)):
        (tmp_path / name).write_text(text)
    result = subprocess.run(
        [openssl, "verify", "-crl_check", "-attime", str(int(at.timestamp())), "-CAfile", str(tmp_path / "ca.pem"),
         "-CRLfile", str(tmp_path / "crl.pem"), str(tmp_path / "cert.pem")],
        capture_output=True, text=True, timeout=30)
    return result.stdout + result.stderr


def crl_serials(plan: Plan) -> set[int]:
    text = server_env(plan)["OPENVPN_CRL"]
    blocks = text.split("-----END X509 CRL-----")[:-1]
    return {revoked.serial_number for block in blocks
            for revoked in x509.load_pem_x509_crl((block + "-----END X509 CRL-----").encode())}


def serial(cert_pem: str) -> int:
    return x509.load_pem_x509_certificate(cert_pem.encode()).serial_number


def test_a_user_removed_from_config_is_revoked(monkeypatch, tmp_path):
    before = plan_at(monkeypatch, DAY_10, stack())
    after = plan_at(monkeypatch, DAY_10, stack(users=("alice",)), earlier=before)
    bob, alice = profile_cert(before, "bob"), profile_cert(after, "alice")
    assert profile_cert(before, "alice") == alice  # kept
    assert crl_serials(before) == set()
    assert crl_serials(after) == {serial(bob)}
    assert "certificate revoked" in openssl_verify(tmp_path, after, bob)
    assert ": OK" in openssl_verify(tmp_path, after, alice)
    assert ": OK" in openssl_verify(tmp_path, after, admin_cert(after))
    # Adding bob back gives him a new certificate; the old one stays revoked.
    again = plan_at(monkeypatch, DAY_10, stack(), earlier=after)
    assert serial(bob) in crl_serials(again)
    assert ": OK" in openssl_verify(tmp_path, again, profile_cert(again, "bob"))


def test_certificates_last_a_year_and_are_renewed_at_the_next_round(monkeypatch, tmp_path):
    start = plan_at(monkeypatch, DAY_10, stack())
    first = {"admin": admin_cert(start), "alice": profile_cert(start, "alice")}
    for pem in first.values():
        certificate = x509.load_pem_x509_certificate(pem.encode())
        lifetime = certificate.not_valid_after_utc - certificate.not_valid_before_utc
        assert lifetime <= datetime.timedelta(days=365)
        # Round 1 starts at least 65 days before it expires.
        assert certificate.not_valid_after_utc - vpn_ledger.round_start(
            1, vpn_ledger.RENEWAL_ROUND_DAYS) >= datetime.timedelta(days=65)
    # Within a round and a CRL period nothing changes: the server step is the same bytes.
    later = plan_at(monkeypatch, DAY_10 + datetime.timedelta(days=15), stack(), earlier=start)
    assert stdin_of(later, SERVER_STEP) == stdin_of(start, SERVER_STEP)
    # The first `pulumi up` of round 1: new keys and certificates (the preview shows the
    # keys' replacement trigger change), the old ones revoked.
    round_1 = vpn_ledger.round_start(1, vpn_ledger.RENEWAL_ROUND_DAYS)
    renewed = plan_at(monkeypatch, round_1 + datetime.timedelta(days=1), stack(), earlier=later)
    triggers = {r.name: (r.replacement_trigger) for r in later.resources if r.name.endswith("-key")}
    moved = {r.name for r in renewed.resources
             if r.name in triggers and r.replacement_trigger != triggers[r.name]}
    assert moved == {f"lab-vpn-pki-{role}-key"
                     for role in ("server", "gateway", "admin", "user-alice", "user-bob")}
    assert admin_cert(renewed) != first["admin"]
    assert crl_serials(renewed) >= {serial(pem) for pem in first.values()}
    at = round_1 + datetime.timedelta(days=1)
    for pem in first.values():
        assert "certificate revoked" in openssl_verify(tmp_path, renewed, pem, at)
    assert ": OK" in openssl_verify(tmp_path, renewed, profile_cert(renewed, "alice"), at)
    # A CRL left unsigned past its nextUpdate refuses everyone (as OpenVPN does).
    expired = at + datetime.timedelta(days=vpn_ledger.CRL_VALIDITY_DAYS + 1)
    assert "CRL has expired" in openssl_verify(tmp_path, renewed,
                                               profile_cert(renewed, "alice"), expired)


def test_the_crl_is_signed_again_before_it_expires(monkeypatch):
    plan = plan_at(monkeypatch, DAY_10, stack())
    crl = x509.load_pem_x509_crl(server_env(plan)["OPENVPN_CRL"].encode())
    assert crl.last_update_utc == vpn_ledger.EPOCH
    assert crl.next_update_utc == vpn_ledger.EPOCH + datetime.timedelta(days=180)
    ca = x509.load_pem_x509_certificate(server_env(plan)["OPENVPN_CA"].encode())
    assert crl.is_signature_valid(ca.public_key())
    next_period = plan_at(monkeypatch, DAY_10 + datetime.timedelta(days=25), stack(),
                          earlier=plan)
    renewed = x509.load_pem_x509_crl(server_env(next_period)["OPENVPN_CRL"].encode())
    assert renewed.last_update_utc == vpn_ledger.EPOCH + datetime.timedelta(days=30)


def test_a_rotation_window_keeps_the_previous_certificates_until_it_closes(monkeypatch,
                                                                           tmp_path):
    start = plan_at(monkeypatch, DAY_10, stack())
    old_alice, old_bob = profile_cert(start, "alice"), profile_cert(start, "bob")
    window = plan_at(monkeypatch, DAY_10, stack(pkiGeneration=1, previousCaTrusted=True),
                     earlier=start)
    # One CRL per trusted CA; alice's previous certificate still passes.
    assert server_env(window)["OPENVPN_CRL"].count("BEGIN X509 CRL") == 2
    assert ": OK" in openssl_verify(tmp_path, window, old_alice)
    # bob leaves during the window: his previous certificate is revoked too.
    removed = plan_at(monkeypatch, DAY_10, stack(users=("alice",), pkiGeneration=1,
                                                 previousCaTrusted=True), earlier=window)
    assert "certificate revoked" in openssl_verify(tmp_path, removed, old_bob)
    assert serial(profile_cert(window, "bob")) in crl_serials(removed)
    assert ": OK" in openssl_verify(tmp_path, removed, old_alice)


@pytest.mark.parametrize("previous, current, trusted, revoked, issued", [
    # A holder removed: revoked.
    ({"issued": {"a": [{"serial": "1", "notAfter": "2027", "generation": 0}]}},
     {}, [0], ["1"], {}),
    # Renewed (same generation): the old one revoked.
    ({"issued": {"a": [{"serial": "1", "notAfter": "2027", "generation": 0}]}},
     {"a": {"serial": "2", "notAfter": "2027", "generation": 0}}, [0], ["1"], {"a": ["2"]}),
    # Rotated while the previous CA is trusted: kept live, not revoked.
    ({"issued": {"a": [{"serial": "1", "notAfter": "2027", "generation": 0}]}},
     {"a": {"serial": "2", "notAfter": "2027", "generation": 1}}, [1, 0], [], {"a": ["2", "1"]}),
    # The previous CA no longer trusted: dropped (nothing it signed passes anyway).
    ({"issued": {"a": [{"serial": "2", "notAfter": "2027", "generation": 1},
                       {"serial": "1", "notAfter": "2027", "generation": 0}]}},
     {"a": {"serial": "2", "notAfter": "2027", "generation": 1}}, [1], [], {"a": ["2"]}),
    # Expired entries leave the list (RFC 5280 5.1.2.6).
    ({"revoked": [{"serial": "7", "notAfter": "2025", "generation": 0, "holder": "x"}]},
     {}, [0], [], {}),
])
def test_the_ledger_rules(previous, current, trusted, revoked, issued):
    record = vpn_ledger.record(previous, current, trusted, "2026")
    assert [entry["serial"] for entry in record["revoked"]] == revoked
    assert {name: [e["serial"] for e in entries]
            for name, entries in record["issued"].items()} == issued


def test_the_ledger_input_is_public(monkeypatch):
    plan = plan_at(monkeypatch, DAY_10, stack())
    ledger = plan.named("lab-vpn-pki-ledger")
    assert "__provider" not in ledger.inputs
    current = plain(ledger.inputs["current"])
    assert sorted(current) == ["admin", "gateway", "user-alice", "user-bob"]
    assert "PRIVATE" not in str(current)


_PROVIDER_PROCESS = r"""
import base64, json, sys
import dill
provider = dill.loads(base64.b64decode(sys.stdin.read()))
olds = {"issued": {"a": [{"serial": "1", "notAfter": "2027", "generation": 0}]}, "revoked": []}
news = {"current": {}, "trusted": [0], "now": "2026"}
print(json.dumps([provider.diff("id", olds, news).changes,
                  provider.update("id", olds, news).outs["revoked"]]))
"""


def test_the_engines_provider_process_loads_the_ledger(tmp_path):
    """The engine runs a dynamic resource's pickled provider in a Python process of its
    own started in the project folder (`python -m pulumi.dynamic`); the provider is
    pickled by reference to this module, and its update revokes what is gone."""
    from pulumi.dynamic.dynamic import serialize_provider
    blob = serialize_provider(vpn_ledger._LedgerProvider())
    result = subprocess.run([sys.executable, "-c", _PROVIDER_PROCESS], input=blob,
                            capture_output=True, text=True, cwd=PROJECT_DIR, timeout=60)
    assert result.returncode == 0, result.stderr
    changed, revoked = json.loads(result.stdout)
    assert changed is True
    assert revoked == [{"serial": "1", "notAfter": "2027", "generation": 0, "holder": "a"}]
