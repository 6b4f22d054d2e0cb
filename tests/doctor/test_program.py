"""The doctor and the program: it reads the outputs the program really exports, and the
program never imports it (a day-2 tool, not part of `pulumi up`)."""

import json
from pathlib import Path

from contract import stack
from preview.engine import unwrap_secrets
from tests.builders import PROJECT_DIR
from tests.imports import top_level_imports


def test_reads_the_lab_stacks_own_outputs(lab_plan, tmp_path):
    values = {name: unwrap_secrets(value) for name, (value, _) in lab_plan.outputs.items()}
    path = tmp_path / "lab-outputs.json"
    path.write_text(json.dumps(values))
    known = stack.read(None, str(path), None)
    # Pulumi.lab.yaml's hosts, as the checks will compare them with the cluster.
    assert [(n.name, n.address, n.role, n.gpus, n.runs_kubelet) for n in known.nodes] == [
        ("controller", "192.168.2.1", "controller", 0, False),
        ("moscow", "192.168.2.2", "worker", 4, True),
        ("madrid", "192.168.2.3", "worker", 4, True),
        ("campos", "192.168.2.4", "worker", 4, True)]
    assert known.default_storage_class == "nfs" and known.pools == [] and not known.vpn
    assert known.kubeconfig.server == "https://192.168.2.1:6443"
    # The control plane: its controllers among the nodes, and the endpoint they serve.
    assert [(n.name, n.address) for n in known.controllers] == [("controller", "192.168.2.1")]
    assert known.api_endpoint == "https://192.168.2.1:6443"


def test_the_program_does_not_import_the_doctor():
    root = Path(PROJECT_DIR)
    program = [root / "__main__.py", *(root / "components").rglob("*.py"),
               *(root / "config").rglob("*.py"), *(root / "preview").rglob("*.py")]
    assert [str(p.relative_to(root)) for p in program if "doctor" in top_level_imports(p)] == []
    # And the doctor needs none of the program's packages (no Pulumi SDK to run it).
    doctor = (root / "doctor").rglob("*.py")
    assert {name for path in doctor for name in top_level_imports(path)} & {
        "components", "config", "preview", "pulumi", "pulumi_kubernetes"} == set()
