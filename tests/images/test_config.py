"""The `gpu-cluster:images` section and its password through the config loader: every bad
value names its key (all at once), the password is never quoted, and the deprecated
kubeflow.imageMirror is read as images.mirror (or refused beside it, saying where it went)."""

import pytest

from config.image_checks import KUBEFLOW_ALIAS_WARNING, LOGIN_WARNING
from tests.config.loading import loads, problem_lines
from tests.builders import bare_metal_config, own_warnings, preview

PASSWORD = 'pa"ss\\word'


def with_images(mirror: dict, password=None, kubeflow: dict = None) -> dict:
    values = bare_metal_config(workers=1)
    values["images"] = {"mirror": mirror}
    if password is not None:
        values["imageMirrorPassword"] = password
    if kubeflow is not None:
        values["kubeflow"] = {"user": {"email": "ada@example.com"}, **kubeflow}
        values["kubeflowPassword"] = "a long test passphrase"
    return values


CASES = [
    ("scheme in the mirror", {"registry": "https://harbor.example.internal"},
     "images.mirror.registry", "is not a mirror like"),
    ("a tag in the mirror", {"registry": "harbor.example.internal/proxy:v1"},
     "images.mirror.registry", "is not a mirror like"),
    ("a shell word in the path", {"registry": "harbor.example.internal/$(id)"},
     "images.mirror.registry", "is not a mirror like"),
    ("an upstream that is no host", {"registry": "harbor.example.internal",
                                     "registries": {"hub": "harbor.example.internal/hub"}},
     "images.mirror.registries.hub", "is not a registry host"),
    ("an upstream with a path", {"registry": "harbor.example.internal",
                                 "upstreams": ["docker.io/library"]},
     "images.mirror.upstreams[0]", "is not a registry host"),
    ("a user with a quote", {"registry": "harbor.example.internal", "username": 'robot"x'},
     "images.mirror.username", "is not a registry user name"),
    ("no CA certificate", {"registry": "harbor.example.internal", "ca": "not a certificate"},
     "images.mirror.ca", "is not a PEM certificate chain"),
    ("unknown pull policy", {"registry": "harbor.example.internal", "pullPolicy": "Sometimes"},
     "images.mirror.pullPolicy", "'IfNotPresent'"),
]


@pytest.mark.parametrize("mirror, key, fragment", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_bad_mirror_names_its_key(mirror, key, fragment):
    problems = problem_lines(with_images(mirror))
    assert any(p.startswith(f"gpu-cluster:{key}") and fragment in p for p in problems), problems


def test_every_problem_at_once_and_the_password_never_quoted():
    values = with_images({"registry": "https://x", "username": "robot$pull"}, password=PASSWORD)
    problems = problem_lines(values)
    assert any(p.startswith("gpu-cluster:images.mirror.registry: ") for p in problems), problems
    assert not any(PASSWORD in p or "pa\"ss" in p for p in problems)


@pytest.mark.parametrize("mirror, password, fragment", [
    ({"registry": "harbor.example.internal", "username": "robot$pull"}, None,
     "pulumi config set --secret gpu-cluster:imageMirrorPassword"),
    ({"registry": "harbor.example.internal"}, "a-token", "images.mirror.username is not"),
    ({"registry": "harbor.example.internal", "username": "robot$pull"}, PASSWORD,
     "the value is not shown"),
])
def test_the_login_needs_its_password_and_a_password_its_login(mirror, password, fragment):
    problems = problem_lines(with_images(mirror, password))
    assert any(p.startswith("gpu-cluster:imageMirrorPassword: ") and fragment in p
               for p in problems), problems
    assert not any(PASSWORD in p for p in problems)


def test_the_password_is_a_secret():
    values = with_images({"registry": "harbor.example.internal", "username": "robot$pull"},
                         password="a-token")
    problems = problem_lines(values, secret=())
    assert any(p.startswith("gpu-cluster:imageMirrorPassword: must be a secret") for p in problems)


def test_kubeflows_image_mirror_is_read_as_the_clusters_with_a_warning():
    values = bare_metal_config(workers=1)
    values["kubeflow"] = {"user": {"email": "ada@example.com"}, "imageMirror": {
        "registry": "harbor.example.internal/proxy",
        "registries": {"docker.io": "harbor.example.internal/hub"}}}
    values["kubeflowPassword"] = "a long test passphrase"
    settings = loads(values)
    assert settings.image_mirror.registry == "harbor.example.internal/proxy"
    assert settings.image_mirror.prefix_for("docker.io") == "harbor.example.internal/hub"
    plan = preview(values)
    assert KUBEFLOW_ALIAS_WARNING in own_warnings(plan)
    assert "gpu-cluster:images.mirror" in KUBEFLOW_ALIAS_WARNING
    # Every node pulls through it, not only Kubeflow.
    assert any(r.name.endswith("-configure-registries")
               for r in plan.of_type("command:remote:Command"))


def test_kubeflows_image_mirror_beside_images_mirror_says_where_it_went():
    values = with_images({"registry": "harbor.example.internal"},
                         kubeflow={"imageMirror": {"registry": "harbor.example.internal/kf"}})
    problems = problem_lines(values)
    assert any(p.startswith("gpu-cluster:kubeflow.imageMirror: moved to images.mirror")
               for p in problems), problems


def test_without_a_mirror_nothing_changes_on_the_hosts():
    plan = preview(bare_metal_config(workers=1))
    assert not [r for r in plan.of_type("command:remote:Command")
                if "configure-registries" in r.name]


def test_a_login_is_warned_as_the_whole_clusters_naming_its_key():
    values = with_images({"registry": "harbor.example.internal", "username": "robot$pull"},
                         password="a-token")
    assert LOGIN_WARNING in own_warnings(preview(values))
    assert LOGIN_WARNING.startswith("images.mirror.username")
    assert LOGIN_WARNING not in own_warnings(preview(with_images({"registry": "harbor.example.internal"})))
