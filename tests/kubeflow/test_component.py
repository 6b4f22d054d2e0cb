"""The Kubeflow component under the SDK mocks (the offline preview engine): stages in
dependency order, the program's secrets between them, refusals with clear errors, the
password hash, the access modes and what the preview writes for review."""

import shutil

import bcrypt
import pytest
import yaml
from cryptography import x509
from pulumi.runtime import rpc

from components.addons.kubeflow import catalog
from components.addons.kubeflow import overlay
from components.addons.kubeflow.install import PLAIN_HTTP_WARNING, dex_password_hash
from config import ConfigError
from preview.engine import run_program
from preview.report import tree, write_artifacts
from preview.stack_file import read_stack
from tests.builders import (PROJECT_DIR, bare_metal_config, cloud_config, hybrid_config,
                            own_warnings, preview, require_tool)
from tests.kubeflow.certificates import curl, https_server, make_certificate
from components.common.step_text import whole_text

PASSWORD = "a long test passphrase"
DIRECTORY = "kubernetes:kustomize/v2:Directory"
TLS_SECRET = f"{overlay.GATEWAY_NAMESPACE}-secret-{overlay.GATEWAY_TLS_SECRET}"


def with_kubeflow(values: dict, **kubeflow) -> dict:
    """Kubeflow with the deprecated single user (kubeflow.user, kubeflowPassword)."""
    values["kubeflow"] = {"user": {"email": "ada@example.com"}, **kubeflow}
    values["kubeflowPassword"] = PASSWORD
    return values


# bcrypt of PASSWORD at cost 4 (fast in tests), a fixed salt.
PASSWORD_HASH = bcrypt.hashpw(PASSWORD.encode(), b"$2b$04$" + b"saltsaltsaltsaltsaltsu").decode()


def with_own_logins(values: dict, **kubeflow) -> dict:
    """Kubeflow where ada, an access.users entry, logs in with her own password."""
    values["kubeflow"] = dict(kubeflow)
    access = values.setdefault("access", {})
    access.setdefault("users", []).append(
        {"name": "ada", "role": "admin", "email": "ada@example.com"})
    values["kubeflowPasswordHashes"] = {"ada": PASSWORD_HASH}
    return values


def kubeflow_values(**source) -> dict:
    """A one-worker bare-metal stack, backups off, with Kubeflow from kubeflow.source
    `source`."""
    values = with_own_logins(bare_metal_config(workers=1))
    values["backup"]["enabled"] = False
    values["kubeflow"]["source"] = source
    return values


def deps(plan, name: str) -> set[str]:
    return {plan.by_urn[d].name for d in plan.named(name).dependencies}


def test_stages_are_chained_in_install_order_after_nodes_and_storage():
    plan = preview(with_kubeflow(bare_metal_config(workers=2)))
    stages = [r.name.removeprefix("test-kubeflow-") for r in plan.of_type(DIRECTORY)]
    assert stages == ["cert-manager", "cert-manager-issuer", "istio-crds", "istio", "auth",
                      "kubeflow-base", "apps", "trainer-runtimes"]
    first = {plan.by_urn[d].name for d in plan.custom_dependencies(
        plan.named("test-kubeflow-cert-manager"))}
    # The nodes through the add-ons' provider, which waits for them.
    assert {"test-kubernetes", "storageclass-nfs"} <= first
    assert {"gpu000-node-metadata", "gpu001-node-metadata"} <= plan.all_dependencies(
        plan.named("test-kubeflow-cert-manager"))
    for before, after in zip(stages, stages[1:]):
        expected = {f"test-kubeflow-{before}"}
        if after == "istio":  # the gateway's certificate, in istio-system (istio-crds)
            expected.add(TLS_SECRET)
            assert deps(plan, TLS_SECRET) - {"test-kubeflow-gateway-tls-key",
                                             "test-kubeflow-gateway-tls-cert"} == {
                "test-kubeflow-istio-crds"}
        if after == "auth":  # the program's secrets, in namespaces istio-crds created
            expected |= {"auth-secret-dex-passwords", "auth-secret-dex-oidc-client",
                         "oauth2-proxy-secret-oauth2-proxy-credentials"}
            for secret in expected - {f"test-kubeflow-{before}"}:
                assert deps(plan, secret) - {"test-kubeflow-oidc-client-secret",
                                             "test-kubeflow-cookie-secret",
                                             "test-kubeflow-dex-password-salt"} == {
                    "test-kubeflow-istio-crds"}
        assert deps(plan, f"test-kubeflow-{after}") == expected, after
    for stage in plan.of_type(DIRECTORY):
        assert stage.inputs["directory"].startswith(f"build/{plan.stack}/kubeflow/")


@pytest.mark.parametrize("components, stages", [
    (["profiles", "katib"], ["cert-manager", "cert-manager-issuer", "istio-crds", "istio", "auth",
                             "kubeflow-base", "apps"]),
    (["trainer"], ["cert-manager", "cert-manager-issuer", "istio-crds", "istio", "auth",
                   "kubeflow-base", "apps", "trainer-runtimes"]),
    ([], ["cert-manager", "cert-manager-issuer", "istio-crds", "istio", "auth", "kubeflow-base"]),
])
def test_selected_components_decide_the_stages(components, stages):
    plan = preview(with_kubeflow(bare_metal_config(workers=1), components=components))
    assert [r.name.removeprefix("test-kubeflow-") for r in plan.of_type(DIRECTORY)] == stages


def test_kubeflow_is_off_unless_configured():
    plan = preview(bare_metal_config(workers=1))
    assert not plan.of_type(DIRECTORY)
    assert "kubeflowUrl" not in plan.outputs


@pytest.mark.parametrize("change, key, fragment", [
    (lambda v: v.pop("kubeflowPassword"), "gpu-cluster:kubeflowPassword",
     "pulumi config set --secret gpu-cluster:kubeflowPassword"),
    (lambda v: v["storage"].update({"nfs": {"host": "controller", "default": False}}),
     "gpu-cluster:kubeflow", "needs the stack's default StorageClass"),
    (lambda v: v.update(kubeflowPassword="12341234"), "gpu-cluster:kubeflowPassword",
     "published example password"),
])
def test_kubeflow_is_refused_with_a_clear_error(change, key, fragment):
    values = with_kubeflow(bare_metal_config(workers=1))
    change(values)
    with pytest.raises(ConfigError) as caught:
        preview(values)
    messages = [str(p) for p in caught.value.problems]
    assert any(m.startswith(f"{key}: ") and fragment in m for m in messages), messages
    assert "12341234" not in str(caught.value)  # a secret is never quoted


def test_password_is_hashed_with_a_random_salt_kept_as_secret_state():
    plan = preview(with_kubeflow(bare_metal_config(workers=1)))
    salt = plan.named("test-kubeflow-dex-password-salt")
    assert salt.type == "random:index/randomBytes:RandomBytes" and salt.inputs["length"] == 16
    secret = plan.named("auth-secret-dex-passwords")
    assert rpc.is_rpc_secret(secret.inputs["stringData"])
    hashed = rpc.unwrap_rpc_secret(secret.inputs["stringData"])["DEX_USER_PASSWORD"]
    assert hashed.startswith("$2b$12$") and bcrypt.checkpw(PASSWORD.encode(), hashed.encode())
    # The salt is random (the mocks make new bytes per run, as a new stack would), not
    # derived from the password: the same password hashes differently per stack.
    again = preview(with_kubeflow(bare_metal_config(workers=1)))
    assert rpc.unwrap_rpc_secret(again.named("auth-secret-dex-passwords").inputs[
        "stringData"])["DEX_USER_PASSWORD"] != hashed
    # Stable for a stack: the hash of a given salt is the same at every run.
    assert dex_password_hash(PASSWORD, "c2FsdHNhbHRzYWx0c2FsdA==") == dex_password_hash(
        PASSWORD, "c2FsdHNhbHRzYWx0c2FsdA==")
    ready = bcrypt.hashpw(b"another passphrase", bcrypt.gensalt(rounds=10)).decode()
    values = with_kubeflow(bare_metal_config(workers=1))
    values["kubeflowPassword"] = ready
    given = preview(values)
    assert rpc.unwrap_rpc_secret(given.named("auth-secret-dex-passwords").inputs[
        "stringData"])["DEX_USER_PASSWORD"] == ready


def test_dex_rolls_on_a_new_password_without_publishing_anything_of_it():
    plan = preview(with_kubeflow(bare_metal_config(workers=1)))
    version = plan.named("test-kubeflow-dex-password-version")
    # Renewed with the hash (a secret keeper), random otherwise.
    assert rpc.is_rpc_secret(version.inputs["keepers"])
    # The plan shows the keeper, of which it knows no secret part, hidden whole.
    assert plan.redact(version.inputs["keepers"]) == {"passwordHash": "[secret]"}
    rollout = plan.named("test-kubeflow-dex-password-rollout")
    assert rollout.type == "kubernetes:apps/v1:DeploymentPatch"
    annotations = rollout.inputs["spec"]["template"]["metadata"]["annotations"]
    assert list(annotations) == ["gpu-cluster/dex-password-version"]
    assert not rpc.is_rpc_secret(annotations["gpu-cluster/dex-password-version"])
    assert deps(plan, "test-kubeflow-dex-password-rollout") >= {
        "test-kubeflow-auth", "test-kubeflow-dex-password-version"}
    # No digest of the hash anywhere in the manifests the stages apply.
    assert "dex-password-sha256" not in str([r.inputs for r in plan.of_type(DIRECTORY)])


def test_preview_writes_the_overlays_and_hides_secret_values(tmp_path):
    plan = preview(with_kubeflow(bare_metal_config(workers=1)))
    written = write_artifacts(plan, tmp_path / "build")
    overlays = sorted(p.relative_to(tmp_path / "build").as_posix() for p in written
                      if "/kubeflow/" in p.as_posix())
    assert "kubeflow/01-cert-manager/kustomization.yaml" in overlays
    assert "kubeflow/01-cert-manager/api-check.yaml" in overlays
    assert "kubeflow/07-apps/user-profile.yaml" in overlays
    everything = "".join(p.read_text() for p in written)
    assert PASSWORD not in everything
    hashed = rpc.unwrap_rpc_secret(plan.named("auth-secret-dex-passwords").inputs[
        "stringData"])["DEX_USER_PASSWORD"]
    assert hashed not in everything
    apps = yaml.safe_load((tmp_path / "build/kubeflow/07-apps/kustomization.yaml").read_text())
    # The vendored release, relative to the overlay the program wrote under build/<stack>/.
    assert "../../../../vendor/kubeflow-manifests-26.03/applications/katib/upstream/" \
           "installs/katib-with-kubeflow" in apps["resources"]
    # Pipelines from the copy beside the overlays, which the preview writes too.
    pipelines = "../upstream/" + catalog.COMPONENT_PATHS["pipelines"][0]
    assert pipelines in apps["resources"]
    assert (tmp_path / "build/kubeflow/07-apps" / pipelines / "kustomization.yaml").is_file()


@pytest.mark.parametrize("layout, access, url", [
    (bare_metal_config, {}, "https://192.168.2.2:31380/"),
    (bare_metal_config, {"tls": {"mode": "off"}}, "http://192.168.2.2:31380/"),
    (bare_metal_config, {"mode": "portForward"}, "https://localhost:8080/"),
    (bare_metal_config, {"mode": "portForward", "listenAddress": "0.0.0.0", "port": 8443},
     "https://192.168.2.1:8443/"),
    (bare_metal_config, {"mode": "portForward", "tls": {"mode": "off"}}, "http://localhost:8080/"),
    (hybrid_config, {"mode": "loadBalancer", "hostname": "kubeflow.example.com"},
     "https://kubeflow.example.com/"),
    (hybrid_config, {"mode": "portForward"}, "https://localhost:8080/"),
])
def test_access_mode_decides_the_url(layout, access, url):
    values = with_kubeflow(layout(workers=2), access=access)
    plan = preview(values)
    assert plan.outputs["kubeflowUrl"] == (url, False)
    steps = [r for r in plan.of_type("command:remote:Command")
             if r.name.endswith("-kubeflow-port-forward")]
    assert bool(steps) == (access.get("mode") == "portForward")
    if steps:
        assert "test-kubeflow-istio" in deps(plan, steps[0].name)
        script = whole_text(rpc.unwrap_rpc_secret(steps[0].inputs["stdin"]))
        assert "gpu-cluster-kubeflow-port-forward" in script
        # The forward goes to the port the gateway serves users on.
        port = "80" if url.startswith("http:") else "443"
        assert f"export GATEWAY_PORT='{port}'" in script.splitlines()


def test_port_forward_is_refused_on_cloud():
    values = with_kubeflow(cloud_config(), access={"mode": "portForward"})
    with pytest.raises(ConfigError) as caught:
        preview(values)
    assert any(str(p).startswith("gpu-cluster:kubeflow.access.mode: portForward runs on the "
                                 "controller over SSH") for p in caught.value.problems)


def test_catalog_pins_the_release_in_one_place():
    from config import versions
    assert versions.KUBEFLOW_MANIFESTS == "26.03"
    paths = {p for stage in [catalog.CERT_MANAGER, catalog.ISTIO, catalog.AUTH] for p in stage.paths}
    assert all(not p.startswith(("http", "/")) for p in paths)


def test_load_balancer_is_open_to_the_admin_networks_by_default():
    values = with_kubeflow(hybrid_config(), access={"mode": "loadBalancer",
                                                    "hostname": "kubeflow.example.com"})
    plan = preview(values)
    istio = yaml.safe_load(
        (PROJECT_DIR / f"build/{plan.stack}/kubeflow/04-istio/kustomization.yaml").read_text())
    [patch] = [yaml.safe_load(p["patch"]) for p in istio["patches"] if p["target"]["kind"] == "Service"]
    assert patch["spec"]["type"] == "LoadBalancer"
    assert patch["spec"]["loadBalancerSourceRanges"] == ["198.51.100.0/24"]


# --- TLS at the gateway -------------------------------------------------------------------


def gateway_secret(plan) -> dict:
    """The gateway's TLS Secret as the program creates it: certificate and key."""
    secret = plan.named(TLS_SECRET)
    assert secret.inputs["type"] == "kubernetes.io/tls"
    assert secret.inputs["metadata"] == {"name": overlay.GATEWAY_TLS_SECRET,
                                         "namespace": overlay.GATEWAY_NAMESPACE}
    data = secret.inputs["stringData"]
    assert rpc.is_rpc_secret(data)
    return rpc.unwrap_rpc_secret(data)


@pytest.mark.parametrize("layout, access, other_names", [
    # Any node answers a node port: the certificate names every workload node.
    (bare_metal_config, {}, ["https://192.168.2.3:31380/"]),
    (bare_metal_config, {"hostname": "kubeflow.example.com"},
     ["https://192.168.2.2:31380/", "https://192.168.2.3:31380/"]),
    (bare_metal_config, {"mode": "portForward"}, ["https://127.0.0.1:8080/"]),
    (bare_metal_config, {"mode": "portForward", "listenAddress": "0.0.0.0"}, []),
    (hybrid_config, {"mode": "loadBalancer", "hostname": "kubeflow.example.com"}, []),
])
def test_the_self_signed_certificate_is_trusted_by_curl_at_every_name(
        tmp_path, layout, access, other_names):
    """The certificate the program makes (the preview generates it from the very inputs
    `pulumi up` gives the TLS provider), served over TLS and opened by curl with the stack
    output as its only trust: the URL, and every other name users may open."""
    curl_path = require_tool("curl")
    plan = preview(with_kubeflow(layout(workers=2), access=access))
    url, _ = plan.outputs["kubeflowUrl"]
    data = gateway_secret(plan)
    certificate, secret = plan.outputs["kubeflowTlsCertificate"]
    assert not secret and certificate == data["tls.crt"]
    parsed = x509.load_pem_x509_certificate(certificate.encode())
    assert not parsed.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    trusted = tmp_path / "kubeflow.crt"
    trusted.write_text(certificate)
    with https_server(data["tls.crt"], data["tls.key"], tmp_path) as port:
        for address in [url, *other_names]:
            result = curl(address, port, trusted, curl_path)
            assert result.returncode == 0 and result.stdout == "kubeflow\n", (address, result.stderr)
        # A name the certificate does not carry is refused: the check can fail.
        result = curl("https://not-kubeflow.example.com/", port, trusted, curl_path)
        assert result.returncode != 0 and "not-kubeflow.example.com" in result.stderr


def test_a_configured_certificate_is_served_and_none_is_made(tmp_path):
    certificate, key = make_certificate("kubeflow.example.com")
    values = with_kubeflow(bare_metal_config(workers=2),
                           access={"hostname": "kubeflow.example.com",
                                   "tls": {"mode": "certificate", "certificate": certificate}})
    values["kubeflowTlsKey"] = key
    plan = preview(values)
    assert gateway_secret(plan) == {"tls.crt": certificate, "tls.key": key}
    assert not [r for r in plan.resources if r.name.startswith("test-kubeflow-gateway-tls")]
    assert "kubeflowTlsCertificate" not in plan.outputs
    assert plan.outputs["kubeflowUrl"] == ("https://kubeflow.example.com:31380/", False)
    # The key never shows in the preview's report or files.
    written = write_artifacts(plan, tmp_path / "build")
    body = key.split("-----")[2].strip().splitlines()[1]
    assert body not in tree(plan) + "".join(p.read_text() for p in written)


def test_plain_http_is_warned_in_the_preview_and_makes_no_certificate():
    plan = preview(with_own_logins(bare_metal_config(workers=1),
                                   access={"tls": {"mode": "off"}}))
    warning = PLAIN_HTTP_WARNING.format(url="http://192.168.2.2:31380/")
    assert own_warnings(plan) == [warning]
    assert f"warning: {warning}" in tree(plan)
    assert not [r for r in plan.resources if r.name == TLS_SECRET or "gateway-tls" in r.name]
    assert "kubeflowTlsCertificate" not in plan.outputs
    # TLS on (the default): no warning.
    assert own_warnings(preview(with_own_logins(bare_metal_config(workers=1)))) == []


def test_the_offline_preview_stands_in_for_an_encrypted_certificate_key(tmp_path):
    """A stack file holds the key encrypted (`secure:`); offline, a throwaway key and a copy
    of the certificate signed by it stand in, so the preview still runs every other check
    on the user's certificate and says what it replaced."""
    certificate, _ = make_certificate("kubeflow.example.com")
    shutil.copy(PROJECT_DIR / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    values = with_kubeflow(bare_metal_config(workers=1),
                           access={"hostname": "kubeflow.example.com",
                                   "tls": {"mode": "certificate", "certificate": certificate}})
    config = {f"gpu-cluster:{k}": v for k, v in values.items()
              if k not in ("kubeflowPassword", "sshPrivateKey")}
    config["gpu-cluster:kubeflowTlsKey"] = {"secure": "v1:AAAA"}
    (tmp_path / "Pulumi.enc.yaml").write_text(yaml.safe_dump({"config": config}))
    stack_file = read_stack(tmp_path, "enc")
    assert "gpu-cluster:kubeflowTlsKey" in stack_file.placeholders
    assert any(p.startswith("gpu-cluster:kubeflow.access.tls.certificate")
               for p in stack_file.placeholders)
    plan = run_program(PROJECT_DIR, stack_file)
    served = x509.load_pem_x509_certificate(gateway_secret(plan)["tls.crt"].encode())
    original = x509.load_pem_x509_certificate(certificate.encode())
    assert served.subject == original.subject
    assert served.not_valid_after_utc == original.not_valid_after_utc
    san = x509.SubjectAlternativeName
    assert served.extensions.get_extension_for_class(san).value == \
        original.extensions.get_extension_for_class(san).value
    # An expired certificate is still refused offline: the other checks ran on it.
    expired, _ = make_certificate("kubeflow.example.com", expired=True)
    config["gpu-cluster:kubeflow"]["access"]["tls"]["certificate"] = expired
    (tmp_path / "Pulumi.enc.yaml").write_text(yaml.safe_dump({"config": config}))
    with pytest.raises(ConfigError) as caught:
        run_program(PROJECT_DIR, read_stack(tmp_path, "enc"))
    assert any("expired on" in str(p) for p in caught.value.problems)
