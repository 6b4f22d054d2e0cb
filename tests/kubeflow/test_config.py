"""The `gpu-cluster:kubeflow` section and its password through the config loader: invalid
cases name their key, the password is never plain text, defaults are sound."""

import pytest

from tests.config.loading import DELETE, loads, problem_lines, refused_at, set_path
from tests.builders import bare_metal_config, cloud_config, hybrid_config
from tests.kubeflow.certificates import make_certificate

# A user's certificate for the name users open, and one for another name.
CERTIFICATE, KEY = make_certificate("kubeflow.example.com", "192.168.2.2")
OTHER_CERTIFICATE, OTHER_KEY = make_certificate("other.example.com")
EXPIRED_CERTIFICATE, EXPIRED_KEY = make_certificate("kubeflow.example.com", expired=True)
WILDCARD_CERTIFICATE, WILDCARD_KEY = make_certificate("*.example.com")


def _kubeflow(password="a long test passphrase", **section):
    """Adds a Kubeflow section (and its password secret) to a valid stack."""
    def mutate(values: dict) -> None:
        values["kubeflow"] = {"user": {"email": "ada@example.com"}, **section}
        if password is not DELETE:
            values["kubeflowPassword"] = password
    return mutate


def _tls(certificate=None, key=None, hostname="kubeflow.example.com", mode="certificate"):
    """A Kubeflow section with `tls.mode` (certificate by default) and the key secret."""
    def mutate(values: dict) -> None:
        tls = {"mode": mode}
        if certificate is not None:
            tls["certificate"] = certificate
        access = {"tls": tls, **({"hostname": hostname} if hostname else {})}
        _kubeflow(access=access)(values)
        if key is not None:
            values["kubeflowTlsKey"] = key
    return mutate


KUBEFLOW_CASES = [
    (bare_metal_config, "no password", _kubeflow(password=DELETE), "gpu-cluster:kubeflowPassword",
     "is required with gpu-cluster:kubeflow"),
    (bare_metal_config, "example password", _kubeflow(password="12341234"),
     "gpu-cluster:kubeflowPassword", "published example password"),
    (bare_metal_config, "short password", _kubeflow(password="pw-4321"),
     "gpu-cluster:kubeflowPassword", "shorter than 12 characters"),
    (bare_metal_config, "broken hash", _kubeflow(password="$2b$12$tooshort"),
     "gpu-cluster:kubeflowPassword", "not one"),
    (bare_metal_config, "password without kubeflow", set_path("kubeflowPassword", "a long passphrase"),
     "gpu-cluster:kubeflowPassword", "gpu-cluster:kubeflow is not"),
    (bare_metal_config, "nobody logs in", lambda v: v.update(kubeflow={}),
     "gpu-cluster:kubeflow", "nobody can log in"),
    (bare_metal_config, "bad email", _kubeflow(user={"email": "ada"}),
     "gpu-cluster:kubeflow.user.email", "not an email address"),
    (bare_metal_config, "unknown component", _kubeflow(components=["kserve"]),
     "gpu-cluster:kubeflow.components[0]", "'profiles'"),
    (bare_metal_config, "dashboard without profiles", _kubeflow(components=["dashboard"]),
     "gpu-cluster:kubeflow.components", "dashboard needs profiles"),
    (bare_metal_config, "no default storage class",
     lambda v: (_kubeflow()(v), v.update(storage={"nfs": {"host": "controller"}, "localPath": {}})),
     "gpu-cluster:kubeflow", "needs the stack's default StorageClass"),
    (bare_metal_config, "load balancer on bare metal",
     _kubeflow(access={"mode": "loadBalancer", "hostname": "kubeflow.example.com"}),
     "gpu-cluster:kubeflow.access.mode", "needs an AWS layout"),
    (hybrid_config, "load balancer without hostname", _kubeflow(access={"mode": "loadBalancer"}),
     "gpu-cluster:kubeflow.access.hostname", "is required with loadBalancer"),
    (cloud_config, "node port on cloud without hostname", _kubeflow(),
     "gpu-cluster:kubeflow.access.hostname", "pool nodes have no fixed addresses"),
    (cloud_config, "port-forward on cloud", _kubeflow(access={"mode": "portForward"}),
     "gpu-cluster:kubeflow.access.mode", "not reached over SSH"),
    (hybrid_config, "port-forward on hybrid off loopback",
     _kubeflow(access={"mode": "portForward", "listenAddress": "0.0.0.0"}),
     "gpu-cluster:kubeflow.access.listenAddress", "must be 127.0.0.1 on hybrid"),
    (bare_metal_config, "node port out of range", _kubeflow(access={"nodePort": 80}),
     "gpu-cluster:kubeflow.access.nodePort", "greater than or equal to 30000"),
    (bare_metal_config, "source ranges without load balancer",
     _kubeflow(access={"sourceRanges": ["198.51.100.0/24"]}),
     "gpu-cluster:kubeflow.access.sourceRanges", "only used with loadBalancer"),
    (bare_metal_config, "mirror with a scheme",
     _kubeflow(imageMirror={"registry": "https://registry.example.internal"}),
     "gpu-cluster:kubeflow.imageMirror.registry", "not a registry prefix"),
    (bare_metal_config, "mirror for a non-registry",
     _kubeflow(imageMirror={"registry": "registry.example.internal", "registries": {"hub": "registry.example.internal/hub"}}),
     "gpu-cluster:kubeflow.imageMirror.registries.hub", "must be a registry host"),
    (bare_metal_config, "bad pull policy",
     _kubeflow(imageMirror={"registry": "registry.example.internal", "pullPolicy": "Sometimes"}),
     "gpu-cluster:kubeflow.imageMirror.pullPolicy", "'IfNotPresent'"),
    (bare_metal_config, "relative local source", _kubeflow(source={"path": "manifests"}),
     "gpu-cluster:kubeflow.source.path", "not an absolute path"),
    (bare_metal_config, "katib startup too short",
     _kubeflow(katib={"mysql": {"startupTimeoutSeconds": 30}}),
     "gpu-cluster:kubeflow.katib.mysql.startupTimeoutSeconds", "greater than or equal to 60"),
    (bare_metal_config, "pipelines startup too short",
     _kubeflow(pipelines={"mysql": {"startupTimeoutSeconds": 30}}),
     "gpu-cluster:kubeflow.pipelines.mysql.startupTimeoutSeconds", "greater than or equal to 60"),
    (bare_metal_config, "pipelines claim size",
     _kubeflow(pipelines={"mysql": {"storageSize": "20GB"}}),
     "gpu-cluster:kubeflow.pipelines.mysql.storageSize", "not a size like 10Gi"),
    (bare_metal_config, "unknown tls mode", _tls(mode="acme"),
     "gpu-cluster:kubeflow.access.tls.mode", "'selfSigned', 'certificate' or 'off'"),
    (bare_metal_config, "certificate mode without certificate", _tls(key=KEY),
     "gpu-cluster:kubeflow.access.tls.certificate", "is required with tls.mode certificate"),
    (bare_metal_config, "certificate mode without key", _tls(CERTIFICATE),
     "gpu-cluster:kubeflowTlsKey", "pulumi config set --secret gpu-cluster:kubeflowTlsKey"),
    (bare_metal_config, "not a PEM certificate", _tls("MIIB not a certificate", KEY),
     "gpu-cluster:kubeflow.access.tls.certificate", "is not a PEM certificate chain"),
    (bare_metal_config, "a key in the certificate field", _tls(KEY, KEY),
     "gpu-cluster:kubeflow.access.tls.certificate", "is not a PEM certificate chain"),
    (bare_metal_config, "a damaged certificate",
     _tls(CERTIFICATE.replace(CERTIFICATE.splitlines()[3], "A" * 64), KEY),
     "gpu-cluster:kubeflow.access.tls.certificate", "is not an X.509 certificate"),
    (bare_metal_config, "a key that does not parse", _tls(CERTIFICATE, "-----BEGIN PRIVATE KEY-----\nx\n"
                                                         "-----END PRIVATE KEY-----\n"),
     "gpu-cluster:kubeflowTlsKey", "is not an unencrypted PEM private key"),
    (bare_metal_config, "another certificate's key", _tls(CERTIFICATE, OTHER_KEY),
     "gpu-cluster:kubeflowTlsKey", "is not the private key of kubeflow.access.tls.certificate"),
    (bare_metal_config, "expired certificate", _tls(EXPIRED_CERTIFICATE, EXPIRED_KEY),
     "gpu-cluster:kubeflow.access.tls.certificate", "expired on"),
    (bare_metal_config, "certificate for another name", _tls(OTHER_CERTIFICATE, OTHER_KEY),
     "gpu-cluster:kubeflow.access.tls.certificate",
     "is not valid for kubeflow.example.com, the host users open (kubeflowUrl); it names "
     "other.example.com"),
    (bare_metal_config, "certificate without hostname: the node's address must be in it",
     _tls(OTHER_CERTIFICATE, OTHER_KEY, hostname=None),
     "gpu-cluster:kubeflow.access.tls.certificate", "is not valid for 192.168.2.2"),
    (bare_metal_config, "wildcard one level too deep",
     _tls(WILDCARD_CERTIFICATE, WILDCARD_KEY, hostname="a.kubeflow.example.com"),
     "gpu-cluster:kubeflow.access.tls.certificate", "is not valid for a.kubeflow.example.com"),
    (bare_metal_config, "certificate with selfSigned", _tls(CERTIFICATE, mode="selfSigned"),
     "gpu-cluster:kubeflow.access.tls.certificate", "only used with tls.mode certificate"),
    (bare_metal_config, "key with tls off", _tls(key=KEY, mode="off"),
     "gpu-cluster:kubeflowTlsKey", "only used with kubeflow.access.tls.mode certificate"),
    (bare_metal_config, "tls key without kubeflow", set_path("kubeflowTlsKey", KEY),
     "gpu-cluster:kubeflowTlsKey", "gpu-cluster:kubeflow is not"),
]


@pytest.mark.parametrize("valid, mutate, path, fragment", [(c[0], *c[2:]) for c in KUBEFLOW_CASES],
                         ids=[f"kubeflow: {c[1]}" for c in KUBEFLOW_CASES])
def test_invalid_kubeflow_config_names_the_key_and_the_problem(valid, mutate, path, fragment):
    values = valid()
    mutate(values)
    problems = refused_at(values, path, fragment)
    assert "a long test passphrase" not in "".join(problems)
    # The key is a secret: never quoted, not even a line of it.
    for key in (KEY, OTHER_KEY, EXPIRED_KEY):
        assert key.splitlines()[1] not in "".join(problems)


@pytest.mark.parametrize("mutate", [
    _tls(CERTIFICATE, KEY),
    _tls(CERTIFICATE, KEY, hostname=None),  # the node's address is in it
    _tls(CERTIFICATE + WILDCARD_CERTIFICATE, KEY),  # a chain: the server's first
    _tls(WILDCARD_CERTIFICATE, WILDCARD_KEY),
], ids=["hostname", "node address", "chain", "wildcard"])
def test_a_usable_certificate_loads(mutate):
    values = bare_metal_config()
    mutate(values)
    settings = loads(values)
    assert settings.kubeflow.access.tls.mode == "certificate"
    assert settings.kubeflow_tls_key.get_secret_value() == values["kubeflowTlsKey"]


def test_the_tls_key_in_plain_text_is_refused():
    values = bare_metal_config()
    _tls(CERTIFICATE, KEY)(values)
    problems = problem_lines(values, secret=("sshPrivateKey", "kubeflowPassword"))
    assert any(p.startswith("gpu-cluster:kubeflowTlsKey: must be a secret") for p in problems)


def test_a_long_invalid_value_is_quoted_short():
    values = bare_metal_config()
    _tls("x" * 3000, KEY)(values)
    [problem] = [p for p in problem_lines(values) if "tls.certificate" in p]
    assert len(problem) < 400 and "(3000 characters)" in problem


def test_kubeflow_password_in_plain_text_is_refused():
    values = bare_metal_config()
    _kubeflow()(values)
    problems = problem_lines(values, secret=("sshPrivateKey",))
    assert any(p.startswith("gpu-cluster:kubeflowPassword: must be a secret") for p in problems)


def test_kubeflow_defaults():
    values = bare_metal_config()
    _kubeflow()(values)
    kubeflow = loads(values).kubeflow
    assert kubeflow.source.ref == "26.03" and kubeflow.source.path is None
    assert kubeflow.components[:2] == ["profiles", "dashboard"] and "trainer" in kubeflow.components
    assert kubeflow.access.mode == "nodePort" and kubeflow.image_mirror is None
    assert kubeflow.katib.mysql.startup_timeout_seconds == 900
    assert kubeflow.pipelines.mysql.startup_timeout_seconds == 900
    assert kubeflow.pipelines.mysql.storage_size == "20Gi" and kubeflow.pipelines.mysql.nfs_safe
    assert kubeflow.access.tls.mode == "selfSigned" and kubeflow.access.tls.certificate is None
    assert kubeflow.user.username == "ada" and kubeflow.user.profile_name == "kubeflow-ada-example-com"
