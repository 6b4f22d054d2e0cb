"""esc/: the Pulumi ESC environment a stack imports for its secrets and AWS credentials.
Checked offline, against the environment syntax
(https://www.pulumi.com/docs/esc/environments/syntax/): what opens AWS is an `aws-login`
with OIDC (no static keys), every secret of the program is read from a secrets provider
(never written in the file), every `${...}` reference resolves, and the stack's required
secrets are all there."""

import re
from pathlib import Path

import pytest
import yaml

from config.model import SECRET_KEYS, StackConfig
from config.problems import NAMESPACE
from preview.stack_file import read_stack
from tests.builders import PROJECT_DIR

ENVIRONMENTS = sorted((PROJECT_DIR / "esc").glob("*.yaml"))
# What the providers return when opened (the provider references above).
PROVIDER_OUTPUTS = {"aws-login": {"accessKeyId", "secretAccessKey", "sessionToken"}}
_REFERENCE = re.compile(r"\$\{([^}]+)\}")
_ROLE_ARN = re.compile(r"arn:aws:iam::\d{12}:role/[\w+=,.@/-]{1,64}")


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def _provider(node, name: str):
    return node.get(f"fn::open::{name}") if isinstance(node, dict) else None


def _paths(node, prefix: str = "") -> set:
    """Every path a reference may name, provider outputs included."""
    found = {prefix} if prefix else set()
    if isinstance(node, dict):
        login = _provider(node, "aws-login")
        secrets = _provider(node, "aws-secrets")
        if login is not None:
            return found | {f"{prefix}.{name}" for name in PROVIDER_OUTPUTS["aws-login"]}
        if secrets is not None:
            return found | {f"{prefix}.{name}" for name in secrets["get"]}
        for key, value in node.items():
            found |= _paths(value, f"{prefix}.{key}" if prefix else key)
    return found


def _references(node) -> list:
    if isinstance(node, dict):
        return [ref for value in node.values() for ref in _references(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in _references(value)]
    return _REFERENCE.findall(node) if isinstance(node, str) else []


def _nodes(node, name: str) -> list:
    """Every `fn::open::<name>` block, at any depth."""
    if not isinstance(node, dict):
        return []
    own = [_provider(node, name)] if _provider(node, name) is not None else []
    return own + [found for value in node.values() for found in _nodes(value, name)]


def test_there_is_an_environment_for_prod():
    assert [p.name for p in ENVIRONMENTS] == ["gpu-cluster-prod.yaml"]


@pytest.mark.parametrize("path", ENVIRONMENTS, ids=lambda p: p.name)
def test_aws_credentials_come_from_an_oidc_login(path):
    environment = load(path)
    assert set(environment) <= {"imports", "values"}
    [login] = _nodes(environment["values"], "aws-login")
    assert set(login) == {"oidc"}, "static credentials in a file are committed keys"
    oidc = login["oidc"]
    assert _ROLE_ARN.fullmatch(oidc["roleArn"]) and oidc["sessionName"]
    assert re.fullmatch(r"\d+[hm]", oidc["duration"])
    variables = environment["values"]["environmentVariables"]
    assert {key: value for key, value in variables.items() if key.startswith("AWS_")} == {
        "AWS_ACCESS_KEY_ID": "${aws.login.accessKeyId}",
        "AWS_SECRET_ACCESS_KEY": "${aws.login.secretAccessKey}",
        "AWS_SESSION_TOKEN": "${aws.login.sessionToken}",
    }
    text = path.read_text()
    assert not re.search(r"AKIA[0-9A-Z]{16}|-----BEGIN|fn::secret", text)


@pytest.mark.parametrize("path", ENVIRONMENTS, ids=lambda p: p.name)
def test_every_reference_resolves(path):
    values = load(path)["values"]
    known = _paths(values)
    references = _references(values)
    assert references
    for reference in references:
        assert reference in known, reference


@pytest.mark.parametrize("path", ENVIRONMENTS, ids=lambda p: p.name)
def test_stack_config_names_program_keys_and_secrets_come_from_a_provider(path):
    values = load(path)["values"]
    secret_outputs = {f"${{aws.secrets.{name}}}" for secrets in _nodes(values, "aws-secrets")
                      for name in secrets["get"]}
    keys = {field.alias for field in StackConfig.model_fields.values()}
    for full_key, value in values["pulumiConfig"].items():
        namespace, _, key = full_key.partition(":")
        assert namespace == NAMESPACE and key in keys, full_key
        if key in SECRET_KEYS:
            # A provider's output stays secret through to the stack's config (the CLI
            # refuses a plain value for a key Pulumi.yaml declares secret); a map's
            # (kubeflowPasswordHashes) entry by entry.
            for leaf in (value.values() if isinstance(value, dict) else [value]):
                assert leaf in secret_outputs, full_key
    for secrets in _nodes(values, "aws-secrets"):
        assert secrets["login"] == "${aws.login}"
        assert all(set(item) == {"secretId"} for item in secrets["get"].values())


def test_prod_gets_every_secret_it_needs():
    environment = load(PROJECT_DIR / "esc/gpu-cluster-prod.yaml")
    # The secrets prod's stack file does not hold: the preview stands in for them.
    missing = set(read_stack(PROJECT_DIR, "prod").missing)
    config = environment["values"]["pulumiConfig"]
    given = set(config) | {f"{key}.{name}" for key, value in config.items()
                           if isinstance(value, dict) for name in value}
    assert missing and missing <= given
    assert "environment: [gpu-cluster/prod]" in (PROJECT_DIR / "Pulumi.prod.yaml").read_text()
