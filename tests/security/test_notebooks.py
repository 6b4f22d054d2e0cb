"""Kubeflow notebooks under Pod Security: the pod a notebook gets, as upstream's pieces build
it, judged by tests/security/pss.py at restricted and baseline.

- From the Jupyter web app: its Notebook template (kubeflow/kubeflow v1.10.0, the pinned
  release's web app image, components/crud-web-apps/jupyter/backend/apps/common/yaml/
  notebook_template.yaml, copied below: it lives in the image, not in kubeflow/manifests)
  sets no securityContext, and no setting adds one (docs/teams.md, "Pod Security and the audit
  log"): refused under restricted, admitted under baseline.
- Written by hand, as docs/teams.md shows: admitted under restricted.

Both as the notebook controller completes them (notebook_controller.go:387 copies the
template's pod spec, :407-419 working directory and port, :427-433 fsGroup 100 only when
the pod has no securityContext) with the sidecar Istio injects in a profile's namespace
(kubeflow/manifests 26.03 common/istio/istio-install/base/install.yaml, the injection
template with Istio CNI and proxy.privileged false: istio-validation at :975-996, istio-proxy
at :1205-1229)."""

import copy
import re

import yaml
from jsonschema import Draft7Validator
from jsonschema.validators import validator_for

from components.addons.kubeflow import catalog
from tests.acceptance.test_validation import closed, errors_of
from tests.builders import PROJECT_DIR
from tests.docs import section
from tests.security import pss

# The web app's template, its placeholders filled as the backend fills them (post.py), and
# the spawner's default image and resources (spawner_ui_config.yaml).
WEB_APP_NOTEBOOK = {
    "apiVersion": "kubeflow.org/v1beta1", "kind": "Notebook",
    "metadata": {"name": "nb", "namespace": "vision", "labels": {"app": "nb"},
                 "annotations": {"notebooks.kubeflow.org/server-type": "jupyter",
                                 "notebooks.kubeflow.org/creator": "alice@example.com"}},
    "spec": {"template": {"spec": {
        "serviceAccountName": "default-editor",
        "containers": [{"name": "nb",
                        "image": "ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-scipy:v1.10.0",
                        "volumeMounts": [], "env": [],
                        "resources": {"requests": {"cpu": "0.5", "memory": "1.0Gi"}}}],
        "volumes": [], "tolerations": []}}},
}

SIDECAR_SECURITY = {"allowPrivilegeEscalation": False, "privileged": False,
                    "capabilities": {"drop": ["ALL"]}, "readOnlyRootFilesystem": True,
                    "runAsGroup": 1337, "runAsUser": 1337, "runAsNonRoot": True}


def notebook_pod(notebook: dict) -> dict:
    """The pod spec of the notebook's StatefulSet, with Istio's injected containers."""
    spec = copy.deepcopy(notebook["spec"]["template"]["spec"])
    main = spec["containers"][0]
    main.setdefault("workingDir", "/home/jovyan")
    main.setdefault("ports", [{"containerPort": 8888, "name": "notebook-port",
                               "protocol": "TCP"}])
    if spec.get("securityContext") is None:
        spec["securityContext"] = {"fsGroup": 100}
    spec.setdefault("initContainers", []).append(
        {"name": "istio-validation", "image": "istio/proxyv2",
         "securityContext": copy.deepcopy(SIDECAR_SECURITY)})
    spec["containers"].append({"name": "istio-proxy", "image": "istio/proxyv2",
                               "securityContext": copy.deepcopy(SIDECAR_SECURITY)})
    return spec


def readme_notebook() -> dict:
    """The Notebook docs/teams.md shows for teams that stay restricted."""
    text = section("docs/teams.md", "Pod Security and the audit log")
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", text, re.S)
                if "kind: Notebook" in b]
    return yaml.safe_load(block)


def test_the_web_app_s_notebooks_need_baseline():
    spec = notebook_pod(WEB_APP_NOTEBOOK)
    assert pss.violations(spec, "baseline") == []
    assert sorted(pss.violations(spec, "restricted")) == [
        "allowPrivilegeEscalation != false in nb", "capabilities not dropping ALL in nb",
        "runAsNonRoot != true in nb", "seccompProfile not set in istio-proxy",
        "seccompProfile not set in istio-validation", "seccompProfile not set in nb"]


def test_the_readme_s_notebook_is_admitted_under_restricted_and_fits_the_crd():
    notebook = readme_notebook()
    spec = notebook_pod(notebook)
    assert pss.violations(spec, "restricted") == []
    # The controller leaves a stated securityContext as it is: fsGroup stays the template's.
    assert spec["securityContext"]["fsGroup"] == 100
    path = (PROJECT_DIR / catalog.VENDORED / "applications/jupyter/notebook-controller/upstream"
            / "crd/bases/kubeflow.org_notebooks.yaml")
    crd = yaml.safe_load(path.read_text())
    group_version = notebook["apiVersion"].split("/")
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == group_version[1]]
    assert crd["spec"]["group"] == group_version[0] and version["served"]
    schema = closed(version["schema"]["openAPIV3Schema"])
    validator = validator_for(schema, default=Draft7Validator)(schema)
    assert errors_of(validator, notebook) == []
