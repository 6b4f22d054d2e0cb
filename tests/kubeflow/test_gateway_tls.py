"""TLS at the Kubeflow gateway, or plain HTTP with the web apps' Secure cookies off, in the
stages built from the vendored release (tests/kubeflow/conftest.py)."""

import yaml

from components.addons.kubeflow import catalog
from components.addons.kubeflow import overlay
from tests.acceptance.test_validation import closed
from tests.kubeflow.overlays import VENDORED, containers, generated_from, find

ISTIO_CRDS = VENDORED / "common/istio/istio-crds/base/crd.yaml"


def env_of(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container.get("env", [])}


def secure_cookie_settings(objects: list[dict]) -> dict[tuple, str]:
    """(Deployment, container) -> APP_SECURE_COOKIES, for every container that has it."""
    return {(o["metadata"]["name"], c["name"]): env_of(c)[catalog.SECURE_COOKIES_ENV]["value"]
            for o in objects if o["kind"] == "Deployment" for c in containers(o)
            if catalog.SECURE_COOKIES_ENV in env_of(c)}


def gateway_validator():
    [crd] = [d for d in yaml.safe_load_all(ISTIO_CRDS.read_text())
             if d and d.get("kind") == "CustomResourceDefinition"
             and d["spec"]["names"]["kind"] == "Gateway"]
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == catalog.GATEWAY[1]]
    from jsonschema import Draft7Validator
    return Draft7Validator(closed(version["schema"]["openAPIV3Schema"]))


def test_the_gateway_serves_https_with_the_program_s_certificate(built):
    group, version, kind, name, namespace = catalog.GATEWAY
    _, objects, upstream = built[catalog.KUBEFLOW_BASE.name]
    [gateway] = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert gateway["apiVersion"] == f"{group}/{version}"
    assert gateway["metadata"]["namespace"] == namespace
    servers = {s["port"]["number"]: s for s in gateway["spec"]["servers"]}
    assert servers[443]["port"]["protocol"] == "HTTPS"
    assert servers[443]["tls"] == {"mode": "SIMPLE", "credentialName": overlay.GATEWAY_TLS_SECRET}
    assert servers[80]["tls"] == {"httpsRedirect": True}
    assert gateway["spec"]["selector"] == {"istio": "ingressgateway"}  # upstream's, kept
    # Upstream serves plain HTTP only: the default access answered 403 in the web apps.
    [plain] = [o for o in upstream if o["kind"] == kind]
    assert [s["port"]["number"] for s in plain["spec"]["servers"]] == [80]
    assert "tls" not in plain["spec"]["servers"][0]
    # The Gateway is valid for Istio's own CRD schema of the pinned release (closed: a
    # misspelt field fails instead of being pruned).
    # (Its schema covers spec and status; apiVersion, kind and metadata are the API's.)
    validator = gateway_validator()
    assert not sorted(e.message for e in validator.iter_errors({"spec": gateway["spec"]}))
    misspelt = yaml.safe_load(yaml.safe_dump(gateway["spec"]).replace("credentialName",
                                                                       "credentialname"))
    assert list(validator.iter_errors({"spec": misspelt}))


def test_secure_cookies_stay_on_with_tls_and_are_turned_off_for_plain_http(built, built_plain):
    apps = {(d, c) for component, (d, c) in catalog.SECURE_COOKIE_APPS.items()}
    with_tls = secure_cookie_settings(built[catalog.APPS][1])
    plain = secure_cookie_settings(built_plain[catalog.APPS][1])
    upstream = secure_cookie_settings(built[catalog.APPS][2])
    # Every app of the pinned release that has the switch is in the catalog, and no other.
    assert set(upstream) == set(with_tls) == set(plain) == apps
    assert set(upstream.values()) == {"true"}  # upstream: 403 over plain HTTP
    assert set(with_tls.values()) == {"true"}
    assert set(plain.values()) == {"false"}


def test_oauth2_proxy_session_cookie_is_secure_with_tls_only(built, built_plain):
    def cookie_secure(objects):
        proxy = find(objects, "Deployment", "oauth2-proxy")["spec"]["template"]["spec"]
        return env_of(proxy["containers"][0])["OAUTH2_PROXY_COOKIE_SECURE"]

    assert cookie_secure(built[catalog.AUTH.name][1]) == {
        "name": "OAUTH2_PROXY_COOKIE_SECURE", "value": "true"}
    plain = cookie_secure(built_plain[catalog.AUTH.name][1])
    assert plain["valueFrom"]["configMapKeyRef"]["key"] == "FORCE_HTTPS"  # upstream's: false
    parameters = [o for o in built_plain[catalog.AUTH.name][1] if o["kind"] == "ConfigMap"
                  and generated_from(o["metadata"]["name"], "oauth2-proxy-parameters")]
    assert [p["data"]["FORCE_HTTPS"] for p in parameters] == ["false"]


def test_plain_http_keeps_upstream_s_gateway_and_its_http_port(built_plain):
    _, objects, _ = built_plain[catalog.KUBEFLOW_BASE.name]
    [gateway] = [o for o in objects if o["kind"] == catalog.GATEWAY[2]]
    assert [s["port"]["number"] for s in gateway["spec"]["servers"]] == [80]
    service = find(built_plain[catalog.ISTIO.name][1], "Service", overlay.GATEWAY_SERVICE)
    assert [p["port"] for p in service["spec"]["ports"] if p.get("nodePort") == 31380] == [80]
