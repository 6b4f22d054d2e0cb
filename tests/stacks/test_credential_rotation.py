"""Credential rotation through whole stacks: raising a generation in config replaces the
credential it names (its key, request and certificate) and changes what carries it, and
nothing else: no other resource is replaced or updated.

Two previews differ in every generated key and certificate, so plans are compared with
generated material masked (PEM blocks, secrets, long base64 and hex runs); what a changed
resource's outputs feed is followed through the inputs' property dependencies."""

import copy
import re
from typing import Any

import pytest
from pulumi.output import Unknown

from preview.plan import Plan, ResourceRecord
from preview import credentials
from tests.builders import bare_metal_config, cloud_config, hybrid_config, preview, shared_preview

_GENERATED = [re.compile(r"-----BEGIN ([A-Z ]+)-----.*?-----END \1-----", re.S),
              re.compile(r"[A-Za-z0-9+/]{40,}={0,2}"), re.compile(r"\b[0-9a-f]{16,}\b"),
              # A certificate's expiry, as the VPN's ledger keeps it (from the run's now).
              re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\b")]


def _masked(plan: Plan, value: Any) -> Any:
    value = plan.redact(value)
    if isinstance(value, Unknown):  # one object per unknown value, equal to no other
        return "<unknown>"
    if isinstance(value, str):
        for pattern in _GENERATED:
            value = pattern.sub("<generated>", value)
        return value
    if isinstance(value, dict):
        return {key: _masked(plan, item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_masked(plan, item) for item in value]
    return value


def _state(plan: Plan, record: ResourceRecord) -> tuple:
    return _masked(plan, record.inputs), record.replacement_trigger


def changed(before: Plan, after: Plan) -> set[str]:
    """Resources in both plans whose own inputs (masked) or replacement trigger differ."""
    old = before.by_urn
    return {r.name for r in after.resources
            if r.urn in old and _state(before, old[r.urn]) != _state(after, r)}


def fed_by(plan: Plan, names: set[str]) -> dict[str, set[str]]:
    """Every resource whose inputs take outputs of `names` (directly or through others
    fed by them), with the inputs that do."""
    urns = {r.urn for r in plan.resources if r.name in names}
    found: dict[str, set[str]] = {}
    grew = True
    while grew:
        grew = False
        for record in plan.resources:
            inputs = {key for key, sources in record.property_dependencies.items()
                      if urns & set(sources)}
            if inputs and record.urn not in urns:
                found[record.name] = inputs
                urns.add(record.urn)
                grew = True
    return found


def with_values(values: dict, section: str, **fields) -> dict:
    values = copy.deepcopy(values)
    values.setdefault(section, {}).update(fields)
    return values


USERS = {"teams": [{"name": "research"}],
         "users": [{"name": "carol", "namespaces": ["research"]},
                   {"name": "dave", "role": "admin"}]}


@pytest.fixture(scope="module")
def hybrid() -> tuple[dict, Plan]:
    values = hybrid_config()
    values["access"] = copy.deepcopy(USERS)
    plan = preview(values)
    assert not changed(plan, preview(values)), "two previews of one stack differ"
    return values, plan


def test_users_certificate_generation_replaces_only_the_users_credentials(hybrid):
    values, before = hybrid
    after = preview(with_values(values, "access", certificateGeneration=1))
    credentials = {f"test-pki-user-{user}-{part}"
                   for user in ("carol", "dave") for part in ("key", "csr")}
    assert changed(before, after) == credentials
    for user in ("carol", "dave"):
        # The key is replaced by its trigger (0 -> 1), the request by its subject.
        assert before.named(f"test-pki-user-{user}-key").replacement_trigger == 0
        assert after.named(f"test-pki-user-{user}-key").replacement_trigger == 1
        assert after.named(f"test-pki-user-{user}-csr").inputs["subject"] == {
            "commonName": user, "serialNumber": "1"}
    # The new request replaces the certificate (cert_request_pem forces it); the new
    # key and certificate reach the users' kubeconfigs, stored in SSM: an update.
    assert fed_by(after, credentials) == {
        "test-pki-user-carol-cert": {"certRequestPem"},
        "test-pki-user-dave-cert": {"certRequestPem"},
        "test-access-carol-kubeconfig": {"value"},
        "test-access-dave-kubeconfig": {"value"},
    }
    # The admin's credential is not the users'.
    assert after.named("test-pki-admin-key").replacement_trigger == 0


def test_admin_certificate_generation_replaces_only_the_admin_credential(hybrid):
    values, before = hybrid
    after = preview(with_values(values, "kubernetes", adminCertificateGeneration=3))
    credentials = {"test-pki-admin-key", "test-pki-admin-csr"}
    assert changed(before, after) == credentials
    assert after.named("test-pki-admin-key").replacement_trigger == 3
    assert after.named("test-pki-admin-csr").inputs["subject"] == {
        "commonName": "test-admin", "organization": "system:masters", "serialNumber": "3"}
    # The new certificate reaches the admin kubeconfig and with it the providers, which
    # their cluster_identifier keeps from being replaced (components/cluster.py).
    fed = fed_by(after, credentials)
    assert fed == {"test-pki-admin-cert": {"certRequestPem"},
                   "test-kubernetes": {"kubeconfig"}, "test-kubernetes-nodes": {"kubeconfig"}}
    for provider in after.of_type("pulumi:providers:kubernetes"):
        assert provider.inputs["clusterIdentifier"] == "test"
    assert after.outputs["kubeconfig"][0] != before.outputs["kubeconfig"][0]


def test_generation_zero_leaves_the_request_as_it_was():
    plan = shared_preview(bare_metal_config())
    assert plan.named("test-pki-admin-csr").inputs["subject"] == {
        "commonName": "test-admin", "organization": "system:masters"}
    # The trigger is set from the start: the engine replaces only on a change from one
    # set value to another.
    assert plan.named("test-pki-admin-key").replacement_trigger == 0


NEW_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZ0b29sZWRtZWFuZDI1NTE5a2V5Zm9ydGVzdHM ops@new"


def test_an_added_ssh_key_changes_only_the_authorized_keys_steps(hybrid):
    values, before = hybrid
    after = preview(with_values(values, "ssh", authorizedKeys=[NEW_KEY]))
    steps = {r.name for r in after.resources if r.name.endswith("-authorized-keys")}
    assert steps and changed(before, after) == steps
    for name in steps:
        assert NEW_KEY in after.redact(after.named(name).inputs["stdin"])
    # Nothing takes their outputs: no other step runs again.
    assert fed_by(after, steps) == {}


def test_a_revoked_ssh_key_changes_only_the_authorized_keys_steps(hybrid):
    values, before = hybrid
    old_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG9sZGtleW9mdGhlbGFwdG9wdGhhdGlzZ29uZW5vdw old"
    after = preview(with_values(values, "ssh", revokedKeys=[old_key]))
    steps = {r.name for r in after.resources if r.name.endswith("-authorized-keys")}
    assert steps and changed(before, after) == steps
    for name in steps:
        assert "export REVOKED_KEYS='" + old_key + "'" in after.redact(
            after.named(name).inputs["stdin"])
    assert fed_by(after, steps) == {}


def test_a_switched_ssh_private_key_replaces_nothing(hybrid):
    values, before = hybrid
    after = preview({**values, "sshPrivateKey": credentials.ssh_private_key()})
    old = before.by_urn
    assert {r.urn for r in after.resources} == set(old)
    # Masked (generated material differs between any two previews), only the instance's
    # key_name differs (the mock names a key pair after its inputs), which it ignores.
    instance = after.named("test-control-plane-host-instance")
    assert changed(before, after) == {instance.name}
    assert {key for key, value in instance.inputs.items()
            if _masked(after, value) != _masked(before, old[instance.urn].inputs[key])
            } == {"keyName"}
    assert "keyName" in instance.ignore_changes
    # Every step's connection carries the new key: an update, which pulumi-command runs
    # as the step's `update` (its create script, idempotent); `triggers` is its only
    # replace-on-change input (pulumi_command 1.2.1, remote/command.py: replace_on_changes).
    steps = [r for r in after.resources if r.type == "command:remote:Command"]
    assert steps and all(r.inputs["connection"] != old[r.urn].inputs["connection"]
                         for r in steps)
    # The controller's key pair would be replaced (public_key forces it): it ignores it.
    pair = after.named("test-control-plane-host-key")
    assert pair.inputs["publicKey"] != old[pair.urn].inputs["publicKey"]
    assert pair.ignore_changes == ["publicKey"]


def test_a_new_kubeflow_password_reaches_only_dex():
    """The password reaches the cluster as its bcrypt hash, made with the stack's salt:
    what takes the salt is all a new password changes. The Secret is updated, the version
    id is renewed (its keeper is the hash: a random id, state only) and the Deployment
    patch is updated, which restarts Dex's pods; nothing else runs again."""
    values = bare_metal_config(workers=1)
    values["kubeflow"] = {"user": {"email": "ada@example.com"}}
    values["kubeflowPassword"] = "a long test passphrase"
    plan = preview(values)
    assert fed_by(plan, {"test-kubeflow-dex-password-salt"}) == {
        "auth-secret-dex-passwords": {"stringData"},
        "test-kubeflow-dex-password-version": {"keepers"},
        "test-kubeflow-dex-password-rollout": {"spec"},
    }


def test_join_token_generation_renews_rke2s_agent_token_and_reruns_only_its_readers():
    values = bare_metal_config(workers=2)
    values["kubernetes"] = {"distribution": "rke2"}
    before = preview(values)
    after = preview(with_values(values, "kubernetes", joinTokenGeneration=1))
    # The agent token is replaced by its trigger; the server token, which encrypts the
    # datastore, is not.
    assert changed(before, after) == {"test-agent-token"}
    assert after.named("test-agent-token").replacement_trigger == 1
    assert after.named("test-server-token").replacement_trigger is None
    # The server writes it and restarts; the agents write it: updates of their steps.
    assert fed_by(after, {"test-agent-token"}) == {
        "controller-install-controller": {"stdin"},
        "gpu000-join-worker": {"stdin"}, "gpu001-join-worker": {"stdin"}}


def test_join_token_generation_leaves_k0s_cloud_pools_alone():
    """Their tokens expire and the controller renews them (tests/stacks/test_pool_nodes.py):
    no program-made pool token is left for the generation to renew."""
    values = cloud_config()
    before = preview(values)
    after = preview(with_values(values, "kubernetes", joinTokenGeneration=2))
    assert changed(before, after) == set()


VPN_CLIENTS = ("gateway", "admin", "user-carol", "user-dave")
VPN_STEPS = {"control-plane-install-openvpn-server", "gpu000-install-openvpn-client"}
# What the VPN has issued and revoked (components/network/vpn_ledger.py).
LEDGER = "test-vpn-pki-ledger"


def only_stdin_changed(before: Plan, after: Plan, names: set[str]) -> None:
    """The steps `names` change in their stdin (an update, which re-runs the step's
    script) and in nothing else: `triggers`, the Command's only replace-on-change input
    (pulumi_command 1.2.1, remote/command.py: replace_on_changes), is never set."""
    old = before.by_urn
    for name in names:
        record = after.named(name)
        assert record.type == "command:remote:Command", name
        differing = {key for key in set(record.inputs) | set(old[record.urn].inputs)
                     if _masked(after, record.inputs.get(key))
                     != _masked(before, old[record.urn].inputs.get(key))}
        assert differing == {"stdin"}, (name, differing)
        assert "triggers" not in record.inputs and record.replacement_trigger is None


def test_opening_a_vpn_rotation_issues_new_client_credentials_and_trusts_both_cas(hybrid):
    values, before = hybrid
    after = preview(with_values(values, "vpn", pkiGeneration=1, previousCaTrusted=True))
    # Nothing goes; the new generation's CA is new resources of its own.
    assert {r.urn for r in before.resources} <= {r.urn for r in after.resources}
    added = {r.name for r in after.resources} - {r.name for r in before.resources}
    assert added == {"test-vpn-pki-ca-alt-key", "test-vpn-pki-ca-alt-cert"}
    credentials = {f"test-vpn-pki-{role}-{part}" for role in VPN_CLIENTS
                   for part in ("key", "csr")}
    # The server keeps its certificate (every peer trusts its CA until the window ends);
    # generation 0's CA is not touched. The ledger of client certificates learns that
    # both CAs are trusted (vpn_ledger.py).
    assert changed(before, after) == credentials | VPN_STEPS | {LEDGER}
    only_stdin_changed(before, after, VPN_STEPS)
    for role in VPN_CLIENTS:
        # Generation 1, and the renewal round of the day (vpn_ledger.py).
        assert after.named(f"test-vpn-pki-{role}-key").replacement_trigger.startswith("1/")
        assert after.named(f"test-vpn-pki-{role}-csr").inputs["subject"]["serialNumber"] == "1"
    assert fed_by(after, credentials | added) == {
        f"test-vpn-pki-{role}-cert": {"certRequestPem", "caCertPem", "caPrivateKeyPem"}
        for role in VPN_CLIENTS} | {step: {"stdin"} for step in VPN_STEPS} | {
        LEDGER: {"current"}}
    for step in VPN_STEPS:
        # One more certificate on each end: the new CA beside the old one.
        pems = [plan.redact(plan.named(step).inputs["stdin"]).count("-----BEGIN CERTIFICATE")
                for plan in (before, after)]
        assert pems[1] == pems[0] + 1, (step, pems)
    for output in ("vpnAdminProfile", "userVpnProfiles"):
        assert after.outputs[output][0] != before.outputs[output][0]


def test_closing_a_vpn_rotation_moves_only_the_server_to_the_new_ca(hybrid):
    values, _ = hybrid
    window = with_values(values, "vpn", pkiGeneration=1, previousCaTrusted=True)
    before = preview(window)
    after = preview(with_values(window, "vpn", previousCaTrusted=False))
    assert {r.urn for r in after.resources} == {r.urn for r in before.resources}
    credentials = {"test-vpn-pki-server-key", "test-vpn-pki-server-csr"}
    assert changed(before, after) == credentials | VPN_STEPS | {LEDGER}
    only_stdin_changed(before, after, VPN_STEPS)
    assert after.named("test-vpn-pki-server-key").replacement_trigger.startswith("1/")
    # The new certificate reaches the server's step; the gateway's changes by the CA
    # bundle that loses the old CA.
    assert fed_by(after, credentials) == {"test-vpn-pki-server-cert": {"certRequestPem"},
                                          "control-plane-install-openvpn-server": {"stdin"}}
    # The window's warning goes (the stack's EFS warning, storage.efs.anonymousNfs, stays).
    def vpn_warnings(plan):
        return [w for w in plan.warnings if w.startswith("vpn.")]

    assert vpn_warnings(before) and not vpn_warnings(after)
