"""storage.efs.issuerBucket: the hybrid layout's public service-account issuer. The name is
checked at the boundary (an S3 bucket name, no dots), refused off hybrid, and the API
server of either distribution issues tokens under it first while it keeps accepting its
own issuer (components/distributions: k0s spec.api extraArgs and rawArgs, RKE2's
kube-apiserver-arg with the prepend form)."""

import pytest
import yaml

from components.distributions import distribution_settings
from components.distributions.k0s import K0s
from components.distributions.k0s_api import K0S_ISSUER
from components.distributions.rke2 import Rke2
from config.hosts import Host
from tests.builders import bare_metal_config, cloud_config, hybrid_config
from tests.config.loading import loads, problem_lines

ISSUER = "https://gpu-lab-issuer.s3.us-east-1.amazonaws.com"
CONTROLLER = Host(name="controller", address="10.20.1.10", role="controller")


def _with_bucket(values: dict, bucket: str = "gpu-lab-issuer") -> dict:
    values.setdefault("storage", {}).setdefault("efs", {})["issuerBucket"] = bucket
    return values


def test_a_hybrid_stack_gets_the_issuer_from_its_bucket_and_region():
    settings = distribution_settings(loads(_with_bucket(hybrid_config())))
    assert settings.service_account_issuer == ISSUER
    assert distribution_settings(loads(hybrid_config())).service_account_issuer is None


@pytest.mark.parametrize("bucket", [
    "Gpu-Issuer", "gpu.issuer", "ab", "a" * 64, "-gpu", "gpu-", "gpu issuer",
    "gpu\nissuer", "xn--gpu", "gpu--ol-s3", "gpu-s3alias", "gpu;rm -rf /"])
def test_a_bad_bucket_name_is_refused_by_its_key(bucket):
    problems = problem_lines(_with_bucket(hybrid_config(), bucket))
    assert len(problems) == 1, problems
    assert problems[0].startswith("gpu-cluster:storage.efs.issuerBucket: "), problems


@pytest.mark.parametrize("values", [cloud_config(), bare_metal_config()],
                         ids=["cloud", "bare-metal"])
def test_the_bucket_is_refused_off_the_hybrid_layout(values):
    if values["layout"] == "bare-metal":
        values["storage"] = {"efs": {"mountTargetAddress": "10.40.0.20"}}
    problems = problem_lines(_with_bucket(values))
    assert problems == ["gpu-cluster:storage.efs.issuerBucket: is only used on the hybrid "
                        "layout, whose on-prem hosts have no instance role; remove it"]


def _k0s_api(settings) -> dict:
    return yaml.safe_load(K0s(settings).cluster_config(CONTROLLER))["spec"]["api"]


def test_k0s_issues_under_the_public_issuer_and_keeps_accepting_its_own():
    settings = distribution_settings(loads(_with_bucket(hybrid_config())))
    api = _k0s_api(settings)
    # extraArgs replace k0s's own flag; rawArgs follow every flag: [public, k0s's].
    assert api["extraArgs"]["service-account-issuer"] == ISSUER
    assert api["extraArgs"]["service-account-jwks-uri"] == f"{ISSUER}/openid/v1/jwks"
    assert api["rawArgs"] == [f"--service-account-issuer={K0S_ISSUER}"]
    unchanged = _k0s_api(distribution_settings(loads(hybrid_config())))
    assert "rawArgs" not in unchanged
    assert not {"service-account-issuer", "service-account-jwks-uri"} & set(
        unchanged["extraArgs"])


def test_rke2_prepends_the_public_issuer_to_its_own():
    values = _with_bucket(hybrid_config())
    values["kubernetes"] = {"distribution": "rke2"}
    settings = distribution_settings(loads(values))
    args = yaml.safe_load(Rke2(settings).cluster_config(CONTROLLER))["kube-apiserver-arg"]
    assert f"service-account-issuer-={ISSUER}" in args
    assert f"service-account-jwks-uri={ISSUER}/openid/v1/jwks" in args
    # Never the replacing form, which would drop RKE2's own issuer.
    assert not [a for a in args if a.startswith("service-account-issuer=")]
