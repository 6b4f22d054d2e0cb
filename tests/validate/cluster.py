"""The recorded cluster `python -m validate` is tested on: a controller and two GPU workers
with 8 A100 SXM4 each (as `bare_metal_config(workers=2, gpus=8)` describes them), their Node
objects, the stack outputs, the rendered acceptance MPIJob, and what each pod prints."""

import copy
import json
from pathlib import Path

import acceptance
from components.kubernetes.kubeconfig import client_kubeconfig
from config import load
from tests.builders import as_cli_config, bare_metal_config
from tests.pki import pem

DATA = Path(__file__).parent / "data"
ACCEPTANCE_DATA = Path(__file__).parents[1] / "acceptance" / "data"
CONFIG = bare_metal_config(workers=2, gpus=8)
HOSTS = {h["name"]: h for h in CONFIG["hosts"]}

# The CUDA vectorAdd sample's output (NVIDIA/cuda-samples vectorAdd.cu printf lines; the
# GPU Operator's docs show the same for nvcr.io/nvidia/k8s/cuda-sample:vectoradd).
VECTOR_ADD = ("[Vector addition of 50000 elements]\n"
              "Copy input data from the host memory to the CUDA device\n"
              "CUDA kernel launch with 196 blocks of 256 threads\n"
              "Copy output data from the CUDA device to the host memory\n"
              "Test PASSED\nDone\n")
VECTOR_ADD_NO_GPU = ("[Vector addition of 50000 elements]\nFailed to allocate device vector A "
                     "(error code no CUDA-capable device is detected)!\n")


def node(name: str, gpus: int) -> dict:
    host = HOSTS[name]
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}
    allocatable = {"cpu": "64", "memory": "1056290932Ki", "pods": "110"}
    if gpus:
        labels["nvidia.com/gpu.product"] = "NVIDIA-A100-SXM4-80GB"
        allocatable["nvidia.com/gpu"] = str(gpus)
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present",
                                 "effect": "NoSchedule"}]} if gpus else {},
            "status": {"allocatable": allocatable,
                       "addresses": [{"type": "InternalIP", "address": host["address"]}],
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def nodes() -> list[dict]:
    return [node("controller", 0), node("gpu000", 8), node("gpu001", 8)]


def outputs(server_url: str, authority) -> dict:
    cert, key = authority.client(days=300)
    kubeconfig = client_kubeconfig("test", server_url, pem(authority.cert), "test-admin",
                                   pem(cert), key)
    return {"kubeconfig": kubeconfig, "apiEndpoint": server_url, "defaultStorageClass": "nfs",
            "nodes": [{"name": h["name"], "address": h["address"],
                       "role": h.get("role", "worker"), "gpus": h.get("gpus", 0),
                       "gpuModel": h.get("gpuModel")} for h in CONFIG["hosts"]]}


def write_acceptance(folder: Path) -> Path:
    """The acceptance files the offline preview writes for this config."""
    cli = as_cli_config(copy.deepcopy(CONFIG))
    files = acceptance.render(load(cli.config, cli.secret_keys, stack="test"))
    folder.mkdir(parents=True, exist_ok=True)
    for name, objects in files.items():
        (folder / name).write_text(acceptance.dump(objects))
    return folder


def healthy(obj: dict) -> dict:
    """What each object of a healthy cluster does."""
    if obj["kind"] == "MPIJob":
        return {"phase": "Succeeded",
                "log": (ACCEPTANCE_DATA / "constructed-socket-fallback-2x4.log").read_text()}
    component = obj["metadata"]["labels"]["app.kubernetes.io/component"]
    node_name = (obj["spec"].get("nodeSelector") or {}).get("kubernetes.io/hostname", "")
    if component == "cuda-smoke":
        return {"phase": "Succeeded", "log": VECTOR_ADD}
    if component == "dcgm-diag":
        return {"phase": "Succeeded", "log": (DATA / "dcgmi-diag-r1-pass.txt").read_text()}
    if component == "nccl-node":
        return {"phase": "Succeeded", "log": (DATA / "constructed-a100-1x8.log").read_text()}
    if component == "iperf3-server":
        return {"phase": "Running", "podIP": HOSTS[node_name]["address"]}
    if component == "iperf3-client":
        return {"phase": "Succeeded", "log": (DATA / "iperf3-client-10g.json").read_text()}
    if component == "storage-rwx":
        env = {e["name"]: e.get("value") for e in obj["spec"]["containers"][0]["env"]}
        other = "gpu001" if node_name == "gpu000" else "gpu000"
        return {"phase": "Succeeded",
                "log": f"node {node_name} read from-{env['PEER']}, written on node {other}\n"}
    if component == "storage-fio":
        return {"phase": "Succeeded", "log": (DATA / "fio-seq.json").read_text()}
    raise AssertionError(f"unexpected component {component}")


def fio_scaled(factor: float) -> str:
    """fio-seq.json with every bandwidth scaled (a slower volume)."""
    document = json.loads((DATA / "fio-seq.json").read_text())
    for job in document["jobs"]:
        for direction in ("read", "write"):
            for key in ("bw_bytes", "bw"):
                job[direction][key] = int(job[direction][key] * factor)
    return json.dumps(document, indent=2)
