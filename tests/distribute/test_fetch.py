"""`fetch`: a user's kubeconfig from its SSM SecureString, with the user's own credentials
(AWS mocked in-process by moto: no request leaves the process)."""

import os
import stat

import pytest
import yaml

from distribute.__main__ import main
from tests.distribute.conftest import CLUSTER, assert_verifies, kubectl_view, load

moto = pytest.importorskip("moto", reason="moto is not installed (requirements-dev.txt)")
boto3 = pytest.importorskip("boto3", reason="boto3 is not installed (requirements.txt)")

REGION = "us-east-1"
PARAMETER = f"/gpu-cluster/{CLUSTER}/users/alice/kubeconfig"


@pytest.fixture
def aws_env(monkeypatch, tmp_path):
    """No real AWS configuration, no instance metadata: only what the test sets."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def ssm(aws_env, monkeypatch, cluster):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with moto.mock_aws():
        client = boto3.client("ssm", region_name=REGION)
        # An RSA kubeconfig is over the standard tier's 4 KB.
        for user in ("alice", "bob"):
            client.put_parameter(Name=f"/gpu-cluster/{CLUSTER}/users/{user}/kubeconfig",
                                 Value=cluster.kubeconfigs[user], Type="SecureString",
                                 Tier="Advanced")
        yield client


def fetch(*extra: str, parameter: str = PARAMETER, user: str = "alice") -> int:
    return main(["fetch", "--user", user, "--parameter", parameter, *extra])


def test_fetch_merges_own_kubeconfig(ssm, tmp_path, capsys, kubectl, cluster):
    target = tmp_path / ".kube" / "config"
    assert fetch("--region", REGION, "--merge-into", str(target)) == 0
    out, err = capsys.readouterr()
    assert out == "" and f"merged context '{CLUSTER}-alice'" in err
    assert not any(secret in err for secret in cluster.secrets)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    view = kubectl_view(kubectl, target, "--minify", "--raw")
    assert_verifies(view, f"{CLUSTER}-alice", cluster.ca)
    assert load(target)["users"] == yaml.safe_load(cluster.kubeconfigs["alice"])["users"]


def test_region_from_environment_and_output_file(ssm, tmp_path, monkeypatch, cluster):
    monkeypatch.setenv("AWS_REGION", REGION)
    target = tmp_path / "alice.yaml"
    assert fetch("--output", str(target)) == 0
    assert target.read_text() == cluster.kubeconfigs["alice"]


def test_someone_elses_parameter_is_refused(ssm, tmp_path, capsys):
    bobs = f"/gpu-cluster/{CLUSTER}/users/bob/kubeconfig"
    assert fetch("--region", REGION, "--output", str(tmp_path / "k"), parameter=bobs) == 2
    assert "holds context 'test-bob', not 'test-alice' of user 'alice'" in capsys.readouterr().err
    assert not (tmp_path / "k").exists()


def test_missing_parameter(ssm, tmp_path, capsys):
    assert fetch("--region", REGION, "--output", str(tmp_path / "k"),
                 parameter="/gpu-cluster/test/users/carol/kubeconfig") == 2
    assert capsys.readouterr().err.strip() == (
        "error: SSM parameter '/gpu-cluster/test/users/carol/kubeconfig' in us-east-1 does not "
        "exist: check the name (stack output userKubeconfigParameters) and the region")


def test_plain_string_parameter_is_not_used(ssm, tmp_path, capsys, cluster):
    ssm.put_parameter(Name="/plain", Value=cluster.kubeconfigs["alice"], Type="String",
                      Tier="Advanced")
    assert fetch("--region", REGION, "--output", str(tmp_path / "k"), parameter="/plain") == 2
    assert "is a String, not a SecureString" in capsys.readouterr().err


def test_no_credentials(aws_env, tmp_path, capsys):
    assert fetch("--region", REGION, "--output", str(tmp_path / "k")) == 2
    assert capsys.readouterr().err.startswith(
        f"error: no AWS credentials to read SSM parameter '{PARAMETER}' in {REGION}")


def test_no_region_and_unknown_profile(aws_env, tmp_path, capsys):
    assert fetch("--output", str(tmp_path / "k")) == 2
    assert "no AWS region: pass --region" in capsys.readouterr().err
    assert fetch("--profile", "nobody", "--output", str(tmp_path / "k")) == 2
    assert "AWS profile 'nobody' is not configured" in capsys.readouterr().err
