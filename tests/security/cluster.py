"""What an example stack asks of Pod Security admission, read back from what the preview
renders: the namespaces the program creates (with their labels), the pods they run, and the
API server's AdmissionConfiguration as the controller's install step carries it (its
environment, read by bash from the rendered step)."""

import subprocess
from pathlib import Path
from typing import Optional

import yaml

import acceptance
from components.addons.kubeflow import catalog
from config import load, versions
from preview.report import write_artifacts
from preview.stack_file import read_stack
from tests.builders import PROJECT_DIR, example_plan
from validate import manifests as validate_manifests

# Kubernetes' own default with no AdmissionConfiguration: privileged
# (kubernetes.io/docs/tasks/configure-pod-container/enforce-standards-admission-controller/,
# "defaults: enforce: privileged").
KUBERNETES_DEFAULT = "privileged"
# The namespaces the distribution makes, which the program labels nowhere.
DISTRIBUTION_NAMESPACES = ("kube-system", "default")


def build(stack: str, directory: Path):
    """The stack's plan and its build folder (as `python -m preview <stack>` writes it)."""
    plan = example_plan(stack)
    stack_file = read_stack(PROJECT_DIR, stack)
    settings = load(stack_file.config, stack_file.secret_keys, stack=stack)
    checks = {f"acceptance/{name}": acceptance.dump(objects)
              for name, objects in acceptance.render(settings).items()}
    write_artifacts(plan, directory, checks)
    return plan, settings


def step_variable(script: Path, name: str) -> str:
    """A variable of a rendered step's environment, as bash reads it (the exports ahead of
    the step's function)."""
    head = script.read_text().split("\ngpu_cluster_create() {", 1)[0]
    result = subprocess.run(["bash", "-c", f'{head}\nprintf %s "${{{name}:-}}"'],
                            capture_output=True, text=True, check=True)
    return result.stdout


def admission_configuration(directory: Path) -> Optional[dict]:
    """The PodSecurity plugin's configuration the controller's API server starts with."""
    # The step over SSH (a cloud controller also has it as a boot step, the same inputs).
    [script] = sorted(directory.glob("hosts/*/[0-9]*-install-controller.sh"))
    for name in ("K0S_ADMISSION_CONFIG", "RKE2_ADMISSION_CONFIG"):
        text = step_variable(script, name)
        if text:
            document = yaml.safe_load(text)
            [plugin] = [p for p in document["plugins"] if p["name"] == "PodSecurity"]
            return plugin["configuration"]
    return None


def program_objects(plan, directory: Path) -> list[dict]:
    """Every object the stack applies that the tests can read: the program's manifests,
    the acceptance files, the vendored MPI operator and the Kubeflow namespaces upstream's
    files label."""
    objects = [dict(r.inputs) for r in plan.resources
               if r.type.startswith("kubernetes:") and r.custom and "kind" in r.inputs
               and not r.type.startswith(("kubernetes:yaml", "kubernetes:helm"))]
    for path in sorted(directory.glob("acceptance/*.yaml")):
        objects += [o for o in yaml.safe_load_all(path.read_text()) if o]
    if any(r.type == "kubernetes:yaml/v2:ConfigFile" and "mpi-operator" in r.name
           for r in plan.resources):
        text = (PROJECT_DIR / versions.MPI_OPERATOR_MANIFEST).read_text()
        objects += [o for o in yaml.safe_load_all(text) if o]
    if any(r.type.startswith("kubernetes:kustomize") for r in plan.resources):
        # The namespaces of the stages upstream labels (common/: Istio, auth, cert-manager,
        # kubeflow and kubeflow-system).
        for path in sorted((PROJECT_DIR / catalog.VENDORED / "common").rglob("namespace*.yaml")):
            objects += [o for o in yaml.safe_load_all(path.read_text())
                        if o and o.get("kind") == "Namespace"]
    return objects


VALIDATE_NAMESPACE = "gpu-validate-run1"
VALIDATE_HOST_NAMESPACE = validate_manifests.host_namespace(VALIDATE_NAMESPACE)


def validate_namespaces() -> list[dict]:
    """The namespaces `python -m validate` creates for a run: its own, restricted, and the
    privileged one of the checks that need the host."""
    return [validate_manifests.namespace(VALIDATE_NAMESPACE, "run1"),
            validate_manifests.namespace(VALIDATE_HOST_NAMESPACE, "run1",
                                         validate_manifests.PRIVILEGED)]
