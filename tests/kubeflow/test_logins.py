"""Kubeflow identities per person: every access.users entry with an email logs in as itself
(a Dex static user with its own bcrypt hash from secret config, or through the
organisation's identity provider), each team's Profile has an owner of its own that no
login gives, and the team's users are its contributors with their role, as Kubeflow's
manual contributor management makes them. Removing a user from config removes their
login and every binding.

The Dex config is the one the real `kubectl kustomize` builds from the program's auth
overlay; the RoleBindings and Namespaces go through kubernetes-validate --strict, the
Profiles and AuthorizationPolicies through their vendored CRDs' schemas."""

import copy
import re

import bcrypt
import pytest
import yaml
from jsonschema import Draft7Validator
from pulumi.runtime import rpc

from tests.k8s_tools import validate_strict
from tests.builders import PROJECT_DIR, bare_metal_config, preview
from tests.config.loading import problem_lines
from tests.kubeflow.overlays import build, find

VENDOR = PROJECT_DIR / "vendor/kubeflow-manifests-26.03"
PROFILE_CRD = VENDOR / "applications/profiles/upstream/crd/bases/kubeflow.org_profiles.yaml"
ISTIO_CRDS = VENDOR / "common/istio/istio-crds/base/crd.yaml"
PASSWORDS = {"alice": "alice's own passphrase", "bob": "bob's different passphrase"}
# Cost 4 keeps the tests fast; a fixed salt each keeps the preview the same.
HASHES = {name: bcrypt.hashpw(password.encode(), b"$2b$04$" + name.encode().ljust(22, b".")
                              ).decode() for name, password in PASSWORDS.items()}
ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
POLICY = "kubernetes:security.istio.io/v1beta1:AuthorizationPolicy"
PROFILE = "kubernetes:kubeflow.org/v1:Profile"
# The teams' profile owners: under .invalid, which no login has (RFC 2606 section 2).
OWNER_DOMAIN = "profiles.gpu-cluster.invalid"


def binding_name(email: str, role: str) -> str:
    """KFAM's name for a contributor's objects (kubeflow/dashboard v2.0.0 components/
    access-management/kfam/bindings.go:61-77 getBindingName, from kind User, the email,
    ClusterRole and the role)."""
    raw = "-".join(["User", re.sub(r"[^a-zA-Z0-9]+", "-", email), "ClusterRole", role]).lower()
    return re.sub(r"[^a-zA-Z0-9]+", "-", raw)


def stack(users: list[dict] = None, **kubeflow) -> dict:
    values = bare_metal_config(workers=1)
    values["kubeflow"] = {"components": ["profiles", "dashboard"], **kubeflow}
    values["access"] = {"teams": [{"name": "vision"}, {"name": "nlp"}], "users": users if
                        users is not None else [
        {"name": "alice", "email": "alice@example.com", "role": "edit", "namespaces": ["vision"]},
        {"name": "bob", "email": "Bob@Example.com", "role": "view",
         "namespaces": ["vision", "nlp"]},
        {"name": "ops", "role": "admin"}]}
    if not kubeflow.get("connectors"):
        values["kubeflowPasswordHashes"] = {
            user["name"]: HASHES[user["name"]] for user in values["access"]["users"]
            if user.get("email")}
    return values


def dex_config(plan) -> dict:
    """Dex's config as kustomize builds it from the auth stage the preview wrote."""
    folder = PROJECT_DIR / plan.named("test-kubeflow-auth").inputs["directory"]
    config_map = find(build(folder), "ConfigMap", "dex")
    return yaml.safe_load(config_map["data"]["config.yaml"])


def dex_environment(plan) -> dict:
    return rpc.unwrap_rpc_secret(plan.named("auth-secret-dex-passwords").inputs["stringData"])


def objects(plan, type_: str) -> list[dict]:
    return [{"apiVersion": r.inputs.get("apiVersion", type_.split(":")[1]),
             "kind": type_.rsplit(":", 1)[1], **r.inputs} for r in plan.of_type(type_)]


def kubeflow_bindings(plan) -> list[dict]:
    return [b for b in objects(plan, ROLE_BINDING) if "user" in b["metadata"].get("annotations", {})]


@pytest.fixture(scope="module")
def plan():
    return preview(stack())


def test_each_user_logs_in_with_their_own_password(plan):
    config = dex_config(plan)
    environment = dex_environment(plan)
    logins = {p["email"]: p for p in config["staticPasswords"]}
    assert set(logins) == {"alice@example.com", "Bob@Example.com"}, \
        "every user with an email needs a Dex login of their own, and nobody else"
    assert config["enablePasswordDB"] is True
    assert len({p["userID"] for p in logins.values()}) == 2
    for name, email in (("alice", "alice@example.com"), ("bob", "Bob@Example.com")):
        login = logins[email]
        assert "hash" not in login  # the hash stays in the Secret
        hashed = environment[login["hashFromEnv"]]
        assert bcrypt.checkpw(PASSWORDS[name].encode(), hashed.encode())
        other = next(p for n, p in PASSWORDS.items() if n != name)
        assert not bcrypt.checkpw(other.encode(), hashed.encode())
    # No shared login: no single password opens every account.
    assert "DEX_USER_PASSWORD" not in environment


def test_team_profiles_have_owners_of_their_own_and_the_users_as_contributors(plan):
    profiles = {p["metadata"]["name"]: p for p in objects(plan, PROFILE)}
    owners = {name: p["spec"]["owner"]["name"] for name, p in profiles.items()}
    assert owners == {"vision": f"vision@{OWNER_DOMAIN}", "nlp": f"nlp@{OWNER_DOMAIN}"}, \
        "a team's profile must be owned per team, by no user's login"
    bindings = {(b["metadata"]["namespace"], b["metadata"]["annotations"]["user"],
                 b["metadata"]["annotations"]["role"], b["roleRef"]["name"])
                for b in kubeflow_bindings(plan)}
    assert bindings == {("vision", "alice@example.com", "edit", "kubeflow-edit"),
                        ("vision", "Bob@Example.com", "view", "kubeflow-view"),
                        ("nlp", "Bob@Example.com", "view", "kubeflow-view")}
    for binding in kubeflow_bindings(plan):
        email = binding["metadata"]["annotations"]["user"]
        assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io",
                                        "kind": "User", "name": email}]
        # KFAM's name for it, so the dashboard lists it (bindings.go getBindingName).
        assert binding["metadata"]["name"] == binding_name(
            email, binding["metadata"]["annotations"]["role"])
    policies = {(p["metadata"]["namespace"], p["metadata"]["name"]): p
                for p in objects(plan, POLICY)}
    assert set(policies) == {(b["metadata"]["namespace"], b["metadata"]["name"])
                             for b in kubeflow_bindings(plan)}
    for (namespace, name), policy in policies.items():
        [rule] = policy["spec"]["rules"]
        assert rule["when"] == [{"key": "request.headers[kubeflow-userid]",
                                 "values": [policy["metadata"]["annotations"]["user"]]}]


def crd_schema(path, kind: str, version: str) -> dict:
    for document in yaml.safe_load_all(path.read_text()):
        if document and document["kind"] == "CustomResourceDefinition" and \
                document["spec"]["names"]["kind"] == kind:
            [served] = [v for v in document["spec"]["versions"] if v["name"] == version]
            return served["schema"]["openAPIV3Schema"]
    raise AssertionError(f"no CRD of {kind}")


def test_the_objects_pass_kubernetes_validate_strict_and_their_crds(plan, tmp_path):
    namespaces = [n for n in objects(plan, "kubernetes:core/v1:Namespace")
                  if n["metadata"]["name"] in ("vision", "nlp")]
    kubernetes_objects = namespaces + kubeflow_bindings(plan)
    report = validate_strict(kubernetes_objects, tmp_path / "access.yaml")
    assert report.count(" passed for resource ") == len(kubernetes_objects) == 5
    # The profile controller adopts a namespace only with its owner's annotation
    # (kubeflow/dashboard profile_controller.go:175-176).
    profiles = {p["metadata"]["name"]: p for p in objects(plan, PROFILE)}
    for namespace in namespaces:
        assert namespace["metadata"]["annotations"]["owner"] == \
            profiles[namespace["metadata"]["name"]]["spec"]["owner"]["name"]
    for type_, crd, kind, version in ((PROFILE, PROFILE_CRD, "Profile", "v1"),
                                      (POLICY, ISTIO_CRDS, "AuthorizationPolicy", "v1beta1")):
        schema = crd_schema(crd, kind, version)
        found = objects(plan, type_)
        assert found
        for obj in found:
            body = {key: value for key, value in obj.items() if key != "metadata"}
            errors = [e.message for e in Draft7Validator(schema).iter_errors(body)]
            assert not errors, (kind, errors)


def test_a_user_removed_from_config_loses_login_and_every_binding():
    values = stack()
    values["access"]["users"] = [u for u in values["access"]["users"] if u["name"] != "bob"]
    values["kubeflowPasswordHashes"].pop("bob")
    plan = preview(values)
    assert "Bob@Example.com" not in {p["email"] for p in dex_config(plan)["staticPasswords"]}
    assert "DEX_PASSWORD_HASH_BOB" not in dex_environment(plan)
    assert not [b for b in kubeflow_bindings(plan) if "bob" in b["metadata"]["name"]], \
        "a removed user keeps a Kubeflow RoleBinding"
    assert not [p for p in objects(plan, POLICY)
                if p["metadata"]["annotations"]["user"] == "Bob@Example.com"]
    assert not [b for b in objects(plan, ROLE_BINDING)
                if any(s["name"] in ("bob", "Bob@Example.com") for s in b["subjects"])]


def test_connectors_send_users_to_the_identity_provider_with_secrets_from_config():
    connectors = [
        {"type": "oidc", "id": "corp", "name": "Corp SSO", "issuer": "https://login.example.com/realms/lab",
         "clientId": "kubeflow"},
        {"type": "ldap", "id": "dir", "name": "Directory", "host": "ldap.example.com:636",
         "bindDn": "cn=kubeflow,ou=services,dc=example,dc=com",
         "userSearch": {"baseDn": "ou=people,dc=example,dc=com", "filter": "(objectClass=person)"}},
    ]
    values = stack(connectors=connectors)
    values["kubeflowConnectorSecrets"] = {"corp": "oidc client secret", "dir": "bind password"}
    plan = preview(values)
    config = dex_config(plan)
    environment = dex_environment(plan)
    assert config["enablePasswordDB"] is False and config["staticPasswords"] == []
    oidc, ldap = config["connectors"]
    assert (oidc["type"], oidc["id"]) == ("oidc", "corp")
    assert oidc["config"]["clientSecret"] == "$DEX_CONNECTOR_SECRET_CORP"
    assert environment["DEX_CONNECTOR_SECRET_CORP"] == "oidc client secret"
    assert oidc["config"]["redirectURI"] == "https://192.168.2.2:31380/dex/callback"
    assert ldap["config"]["bindPW"] == "$DEX_CONNECTOR_SECRET_DIR"
    assert environment["DEX_CONNECTOR_SECRET_DIR"] == "bind password"
    assert ldap["config"]["insecureNoSSL"] is False
    # Only the program's own variables: Dex expands every $ in a connector's config.
    text = yaml.safe_dump(config["connectors"])
    assert text.count("$") == 2


def with_kubeflow_users(**changes) -> dict:
    values = stack()
    values.update(changes)
    return values


@pytest.mark.parametrize("change, expected", [
    (lambda v: v["kubeflowPasswordHashes"].pop("bob"),
     "gpu-cluster:kubeflowPasswordHashes.bob: is required: access.users[1] (bob)"),
    (lambda v: v["kubeflowPasswordHashes"].update(bob="$2b$12$short"),
     "gpu-cluster:kubeflowPasswordHashes.bob: is not a bcrypt hash"),
    (lambda v: v["kubeflowPasswordHashes"].update(bob=HASHES["bob"] + "\n"),
     "gpu-cluster:kubeflowPasswordHashes.bob: is not a bcrypt hash"),
    (lambda v: v["kubeflowPasswordHashes"].update(carol=HASHES["bob"]),
     "gpu-cluster:kubeflowPasswordHashes.carol: names no access.users entry with an email"),
    (lambda v: v["access"]["users"][0].update(email="team@profiles.gpu-cluster.invalid"),
     "gpu-cluster:access.users[0].email: "),
    (lambda v: v["access"]["users"][1].update(email="ALICE@example.com"),
     "gpu-cluster:access.users: "),
    (lambda v: v["kubeflow"].update(connectors=[{
        "type": "oidc", "id": "corp", "name": "Corp", "issuer": "https://login.example.com/$HOME",
        "clientId": "kubeflow"}]), "gpu-cluster:kubeflow.connectors[0].issuer: "),
    (lambda v: v["kubeflow"].update(connectors=[{
        "type": "ldap", "id": "dir", "name": "Dir", "host": "ldap.example.com:636",
        "bindDn": "cn=x,dc=example,dc=com", "userSearch": {"baseDn": "dc=example,dc=com",
                                                          "filter": "(uid=$USER)"}}]),
     "gpu-cluster:kubeflow.connectors[0].userSearch.filter: "),
    (lambda v: v["kubeflow"].update(connectors=[{
        "type": "oidc", "id": "corp", "name": "Corp", "issuer": "https://login.example.com",
        "clientId": "kubeflow"}]), "gpu-cluster:kubeflowConnectorSecrets.corp: is required"),
])
def test_bad_logins_are_refused_by_key_without_quoting_secrets(change, expected):
    values = copy.deepcopy(stack())
    change(values)
    lines = problem_lines(values, secret=("sshPrivateKey", "kubeflowPasswordHashes",
                                          "kubeflowConnectorSecrets"))
    assert any(line.startswith(expected) for line in lines), lines
    text = "\n".join(lines)
    for hashed in HASHES.values():
        assert hashed not in text and hashed[7:29] not in text
