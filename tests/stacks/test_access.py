"""Teams and users through the offline preview: namespaces with quotas and container
defaults, role bindings per user, what those roles allow once Kubernetes has aggregated
every ClusterRole the stack installs (tests/rbac.py), and per-user kubeconfigs whose real
certificates are signed by the cluster CA (loading them with kubectl is in tests/distribute)."""

import base64
import datetime
import re

import pytest
import yaml
from jsonschema import Draft7Validator
from cryptography import x509
from cryptography.x509.oid import NameOID
from pulumi.runtime import rpc

from preview.report import write_artifacts
from tests.builders import PROJECT_DIR, example_plan, bare_metal_config, preview, require_tool
from components.addons.kubeflow import catalog
from tests.rbac import Rbac, Request, stack_rbac_objects
from tests.stacks.test_artifacts import validate_manifests

ACCESS = {
    "teams": [{"name": "vision", "quota": {"gpus": 8, "cpu": "64", "memory": "512Gi",
                                           "storage": "2Ti"}},
              {"name": "nlp"}],
    "users": [{"name": "alice", "namespaces": ["vision"]},
              {"name": "bob", "role": "view", "groups": ["researchers"],
               "namespaces": ["vision", "nlp"]},
              {"name": "root", "role": "admin"}],
}


@pytest.fixture(scope="module")
def plan():
    values = bare_metal_config(workers=1)
    values["access"] = ACCESS
    return preview(values)


def objects(plan, kind: str) -> dict[str, dict]:
    """The access component's objects of one kind."""
    return {r.name: r.inputs for r in plan.resources
            if r.type.endswith(f":{kind}") and "gpu-cluster:access:Access$" in r.urn}


def test_each_team_gets_a_namespace_its_quota_and_container_defaults(plan):
    assert {n["metadata"]["name"] for n in objects(plan, "Namespace").values()} == {
        "vision", "nlp"}
    quotas = objects(plan, "ResourceQuota")
    assert list(quotas) == ["vision-resourcequota-team-quota"]  # nlp sets no quota
    assert quotas["vision-resourcequota-team-quota"]["spec"]["hard"] == {
        "requests.nvidia.com/gpu": "8", "requests.cpu": "64", "requests.memory": "512Gi",
        "requests.storage": "2Ti"}
    limits = objects(plan, "LimitRange")
    assert set(limits) == {"vision-limitrange-container-defaults",
                           "nlp-limitrange-container-defaults"}
    [container] = limits["nlp-limitrange-container-defaults"]["spec"]["limits"]
    assert container["defaultRequest"] == {"cpu": "100m", "memory": "256Mi"}


def test_users_are_bound_to_their_role_in_their_namespaces_only(plan):
    bindings = objects(plan, "RoleBinding")
    assert {(b["metadata"]["namespace"], b["subjects"][0]["name"], b["roleRef"]["name"])
            for b in bindings.values()} == {
        ("vision", "alice", "edit"), ("vision", "bob", "view"), ("nlp", "bob", "view")}
    [cluster_binding] = objects(plan, "ClusterRoleBinding").values()
    assert cluster_binding["subjects"][0]["name"] == "root"
    assert cluster_binding["roleRef"]["name"] == "cluster-admin"


def test_removing_a_user_removes_their_bindings_and_kubeconfig():
    values = bare_metal_config(workers=1)
    values["access"] = {**ACCESS, "users": ACCESS["users"][:1]}
    smaller = preview(values)
    names = {r.name for r in smaller.resources}
    assert not any("user-bob" in name or "user-root" in name for name in names)
    assert set(smaller.outputs["userKubeconfigs"][0]) == {"alice"}


def user_certificate(kubeconfig: str) -> tuple[x509.Certificate, x509.Certificate]:
    document = yaml.safe_load(kubeconfig)
    ca = x509.load_pem_x509_certificate(
        base64.b64decode(document["clusters"][0]["cluster"]["certificate-authority-data"]))
    cert = x509.load_pem_x509_certificate(
        base64.b64decode(document["users"][0]["user"]["client-certificate-data"]))
    return ca, cert


def test_user_kubeconfigs_carry_their_own_certificate_signed_by_the_cluster_ca(plan):
    kubeconfigs, secret = plan.outputs["userKubeconfigs"]
    assert secret and set(kubeconfigs) == {"alice", "bob", "root"}
    admin_ca, admin_cert = user_certificate(plan.outputs["kubeconfig"][0])
    for name, kubeconfig in kubeconfigs.items():
        ca, cert = user_certificate(kubeconfig)
        assert ca == admin_ca and cert != admin_cert
        cert.verify_directly_issued_by(ca)
        assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == name
        groups = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
        assert groups == (["researchers"] if name == "bob" else [])
        lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
        assert lifetime == datetime.timedelta(days=90)
        document = yaml.safe_load(kubeconfig)
        assert document["current-context"] == f"test-{name}"
        assert document["contexts"][0]["context"] == {"cluster": "test", "user": f"test-{name}"}


@pytest.mark.tools
def test_lab_access_objects_pass_kubernetes_validate_strict(tmp_path):
    validate = require_tool("kubernetes-validate")
    lab = example_plan("lab")
    write_artifacts(lab, tmp_path / "lab")
    manifests = validate_manifests(lab, tmp_path / "lab", validate)
    kinds = {path.name.split("-")[0] for path in manifests}
    assert {"namespace", "resourcequota", "limitrange", "rolebinding",
            "clusterrolebinding"} <= kinds
    # The job kinds' roles the built-in roles aggregate (MPIJob, and Trainer with Kubeflow).
    names = {path.name for path in manifests}
    assert {f"clusterrole-gpu-cluster-{kind}-{role}.yaml" for kind in ("mpijobs", "trainjobs")
            for role in ("edit", "view")} <= names


def test_on_aws_each_users_kubeconfig_is_a_secure_string_they_can_fetch():
    prod = example_plan("prod")
    [parameter] = [p for p in prod.of_type("aws:ssm/parameter:Parameter")
                   if p.inputs["name"] == "/gpu-cluster/prod/users/carol/kubeconfig"]
    assert parameter.inputs["type"] == "SecureString"
    assert parameter.inputs["tier"] == "Intelligent-Tiering"
    assert rpc.is_rpc_secret(parameter.inputs["value"])
    assert prod.outputs["userKubeconfigParameters"] == (
        {"carol": "/gpu-cluster/prod/users/carol/kubeconfig"}, False)


def profile_parts(profile: str) -> dict[str, str]:
    return {tag: profile.split(f"<{tag}>\n")[1].split(f"\n</{tag}>")[0]
            for tag in ("ca", "cert", "key", "tls-crypt")}


def test_on_hybrid_users_reach_the_private_api_with_their_own_vpn_profile():
    prod = example_plan("prod")
    [cluster] = yaml.safe_load(prod.outputs["userKubeconfigs"][0]["carol"])["clusters"]
    assert cluster["cluster"]["server"] == "https://10.20.0.10:6443"
    profiles, secret = prod.outputs["userVpnProfiles"]
    assert secret and set(profiles) == {"carol"}
    user, admin = profile_parts(profiles["carol"]), profile_parts(prod.outputs["vpnAdminProfile"][0])
    assert user["ca"] == admin["ca"] and user["tls-crypt"] == admin["tls-crypt"]
    assert user["cert"] != admin["cert"] and user["key"] != admin["key"]
    cert = x509.load_pem_x509_certificate(user["cert"].encode())
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(user["ca"].encode()))
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "user-carol"
    # Everything but the holder, certificate and key is the administrator's profile.
    assert without_credentials(profiles["carol"]) == without_credentials(
        prod.outputs["vpnAdminProfile"][0])


def without_credentials(profile: str) -> str:
    """A profile without its first (holder) line and its <cert> and <key> blocks."""
    body = profile.split("\n", 1)[1]
    return re.sub(r"<(cert|key)>\n.*?</\1>\n", "", body, flags=re.S)


# The pinned Kubeflow release the stages apply, vendored (vendor/README.md).
KUBEFLOW = PROJECT_DIR / catalog.VENDORED
PROFILES_CRD = KUBEFLOW / "applications/profiles/upstream/crd/bases/kubeflow.org_profiles.yaml"


def kubeflow_objects(relative: str) -> list[dict]:
    return [o for o in yaml.safe_load_all((KUBEFLOW / relative).read_text()) if o]


def test_with_kubeflow_each_team_is_a_profile_the_controller_adopts():
    lab = example_plan("lab")
    profiles = {r.name: r for r in lab.resources if r.type == "kubernetes:kubeflow.org/v1:Profile"}
    assert set(profiles) == {"vision-kubeflow-profile", "nlp-kubeflow-profile"}
    namespaces = objects(lab, "Namespace")
    for team in ("vision", "nlp"):
        profile = profiles[f"{team}-kubeflow-profile"]
        # Owned per team, by no login (tests/kubeflow/test_logins.py: the contributors).
        email = f"{team}@profiles.gpu-cluster.invalid"
        assert profile.inputs["spec"]["owner"] == {"kind": "User", "name": email}
        assert namespaces[f"namespace-{team}"]["metadata"]["annotations"] == {"owner": email}
        waits_for = {lab.by_urn[d].name for d in profile.dependencies}
        assert {f"namespace-{team}", "lab-kubeflow-apps"} <= waits_for
    crd = yaml.safe_load(PROFILES_CRD.read_text())
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    validator = Draft7Validator(version["schema"]["openAPIV3Schema"])
    for profile in profiles.values():
        document = {"apiVersion": profile.inputs["apiVersion"], "kind": profile.inputs["kind"],
                    "metadata": profile.inputs["metadata"], "spec": profile.inputs["spec"]}
        assert not list(validator.iter_errors(document))


# What the RBAC tests bind: each built-in role in a team namespace, and a cluster admin.
RBAC_ACCESS = {
    "teams": [{"name": "vision"}, {"name": "nlp"}],
    "users": [{"name": "alice", "namespaces": ["vision"]},
              {"name": "bob", "role": "view", "namespaces": ["vision"]},
              {"name": "dana", "role": "admin", "namespaces": ["nlp"]},
              {"name": "root", "role": "admin"}],
}
WRITE = ("create", "update", "patch", "delete", "deletecollection")
READ = ("get", "list", "watch")


@pytest.fixture(scope="module")
def rbac_plan():
    values = bare_metal_config(workers=1)
    values["access"] = RBAC_ACCESS
    return preview(values)


def mpijobs(verb: str, namespace: str, subresource: str = "") -> Request:
    return Request(verb, "kubeflow.org", "mpijobs", subresource, namespace=namespace)


def test_upstream_alone_gives_the_built_in_roles_no_mpijobs(rbac_plan):
    """Why the stack adds roles: mpi-operator v0.8.0 labels its roles only for Kubeflow's
    kubeflow-edit/-view, so without the program's own, edit and admin users get nothing."""
    objects = [o for o in stack_rbac_objects(rbac_plan)
               if not (o["kind"] == "ClusterRole"
                       and o["metadata"]["name"].startswith("gpu-cluster-mpijobs-"))]
    assert {"kubeflow-mpijobs-edit", "mpi-operator"} <= {
        o["metadata"]["name"] for o in objects if o["kind"] == "ClusterRole"}
    rbac = Rbac.of(objects)
    assert not rbac.allowed("alice", mpijobs("create", "vision"))
    assert not rbac.allowed("dana", mpijobs("get", "nlp"))
    assert rbac.allowed("alice", Request("create", "batch", "jobs", namespace="vision"))


def test_edit_and_admin_users_submit_mpijobs_in_their_namespaces_only(rbac_plan):
    """Aggregated from every ClusterRole the stack installs (its own and the pinned
    mpi-operator manifest's) into Kubernetes' bootstrap edit/admin/view roles."""
    rbac = Rbac.of(stack_rbac_objects(rbac_plan))
    for user, namespace in (("alice", "vision"), ("dana", "nlp")):
        for verb in WRITE + READ:
            assert rbac.allowed(user, mpijobs(verb, namespace)), (user, verb)
        assert rbac.allowed(user, mpijobs("get", namespace, "status"))
        # Status belongs to the operator, as for the built-in kinds.
        assert not rbac.allowed(user, mpijobs("update", namespace, "status"))
    assert not rbac.allowed("alice", mpijobs("create", "nlp"))
    assert not rbac.allowed("dana", mpijobs("create", "vision"))
    assert rbac.allowed("root", mpijobs("create", "vision"))


def test_view_users_read_mpijobs_but_cannot_submit_them(rbac_plan):
    rbac = Rbac.of(stack_rbac_objects(rbac_plan))
    for verb in READ:
        assert rbac.allowed("bob", mpijobs(verb, "vision")), verb
    assert rbac.allowed("bob", mpijobs("get", "vision", "status"))
    for verb in WRITE:
        assert not rbac.allowed("bob", mpijobs(verb, "vision")), verb
    assert not rbac.allowed("bob", mpijobs("get", "nlp"))


def test_edit_users_get_at_least_what_upstream_gives_kubeflow_edit_on_mpijobs(rbac_plan):
    """Every verb upstream's kubeflow-mpijobs-edit/-view grant on MPIJobs themselves
    reaches the built-in edit/view roles."""
    rbac = Rbac.of(stack_rbac_objects(rbac_plan))
    upstream = {o["metadata"]["name"]: o for o in stack_rbac_objects(rbac_plan)
                if o["kind"] == "ClusterRole"}
    for role, user in (("kubeflow-mpijobs-edit", "alice"), ("kubeflow-mpijobs-view", "bob")):
        [rule] = upstream[role]["rules"]
        assert "mpijobs" in rule["resources"]
        for verb in rule["verbs"]:
            assert rbac.allowed(user, mpijobs(verb, "vision")), (role, verb)


def test_without_the_mpi_operator_no_mpijob_roles():
    values = bare_metal_config(workers=1)
    values["access"], values["mpi"] = RBAC_ACCESS, {"operator": False}
    names = {o["metadata"]["name"] for o in stack_rbac_objects(preview(values))
             if o["kind"] == "ClusterRole"}
    assert not {n for n in names if "mpijobs" in n}


TRAINER = "applications/trainer/upstream/overlays/kubeflow-platform"


def test_with_kubeflow_trainer_edit_users_submit_trainjobs(lab_plan):
    """The lab stack installs Trainer v2; with Kubeflow's own roles (kubeflow-roles and the
    trainer's, as its stages apply them) the built-in roles still need the program's."""
    kubeflow = kubeflow_objects(f"{TRAINER}/kubeflow-trainer-roles.yaml") + kubeflow_objects(
        "common/kubeflow-roles/base/cluster-roles.yaml")
    ours = stack_rbac_objects(lab_plan)
    rbac = Rbac.of(ours + kubeflow)

    def trainer(verb: str, resource: str, user: str) -> bool:
        return rbac.allowed(user, Request(verb, "trainer.kubeflow.org", resource,
                                          namespace="vision"))

    for verb in WRITE + READ:
        assert trainer(verb, "trainjobs", "alice"), verb
    for verb in READ:
        assert trainer(verb, "trainjobs", "bob") and trainer(verb, "trainingruntimes", "bob")
        assert trainer(verb, "trainingruntimes", "alice")
    assert not trainer("create", "trainjobs", "bob")
    # Runtimes are the cluster admins' to write, as upstream's kubeflow-trainer-edit has it.
    assert not trainer("create", "trainingruntimes", "alice")
    assert rbac.allowed("alice", mpijobs("create", "vision"))
    without = Rbac.of([o for o in ours if not o["metadata"]["name"].startswith(
        "gpu-cluster-trainjobs-")] + kubeflow)
    assert not without.allowed("alice", Request("create", "trainer.kubeflow.org", "trainjobs",
                                                namespace="vision"))
