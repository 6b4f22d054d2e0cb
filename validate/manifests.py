"""The objects a run creates: two namespaces, then pods (and claims, and the acceptance
MPIJob) in them, all with the run's label. Pods run once (restartPolicy Never), with a
deadline, no service account token, the runtime's seccomp profile and no privilege
escalation; only what a check needs beyond that is added, and said why.

The run's namespace enforces Pod Security `restricted`, as a team's does: the CUDA sample,
NCCL on one node, the shared-volume pods and fio run there as non-root users without
capabilities. The checks that need the host (dcgmi's SYS_ADMIN; iperf3 and the fabric MPIJob
on the host network) run in a second namespace, `<run namespace>-host`, at `privileged`."""

import copy
from typing import Optional

from validate import images
from validate.kube import RUN_LABEL

HOSTNAME_LABEL = "kubernetes.io/hostname"
GPU_RESOURCE = "nvidia.com/gpu"
# The RuntimeClass components/addons/gpu_support.py creates (patches, where the distribution
# installs its own) for GPU pods.
RUNTIME_CLASS = "nvidia"
# nccl-tests built with MPI=1 (the pinned image, acceptance/mpi_benchmark.py ALL_REDUCE_PERF).
ALL_REDUCE_PERF = "/opt/nccl-tests/build/all_reduce_perf"
IPERF3_PORT = 15201


def labels(run_id: str, component: str) -> dict:
    return {"app.kubernetes.io/name": "gpu-validate", "app.kubernetes.io/part-of": "gpu-cluster",
            "app.kubernetes.io/component": component, RUN_LABEL: run_id}


RESTRICTED, PRIVILEGED = "restricted", "privileged"
# A user every image has (Debian's and Ubuntu's `nobody`), for tools that need no home.
NOBODY = 65534
# nccl-tests' image: the `ubuntu` user of its ubuntu:24.04 base (acceptance/mpi_team.py).
MPI_UID = 1000


def host_namespace(name: str) -> str:
    return f"{name}-host"


def namespace(name: str, run_id: str, level: str = RESTRICTED) -> dict:
    """A run's namespace at a stated level, whatever the cluster's default
    (https://kubernetes.io/docs/concepts/security/pod-security-admission/). The host one is
    privileged: the fabric MPIJob's workers and iperf3 use the host network (NCCL measured on
    the hosts' NICs) and dcgmi needs SYS_ADMIN, which baseline refuses too."""
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {
                **labels(run_id, "namespace"),
                "pod-security.kubernetes.io/enforce": level}}}


def tolerations(node: dict) -> list[dict]:
    """Tolerations for exactly the taints the node carries now."""
    result = []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute"):
            item = {"key": taint["key"], "effect": taint["effect"]}
            item.update({"operator": "Equal", "value": taint["value"]} if taint.get("value")
                        else {"operator": "Exists"})
            result.append(item)
    return result


def _container_security(add: Optional[list[str]] = None) -> dict:
    capabilities: dict = {"drop": ["ALL"]}
    if add:
        capabilities["add"] = add
    return {"allowPrivilegeEscalation": False, "capabilities": capabilities}


def pod(name: str, ns: str, run_id: str, component: str, container: dict, deadline: int,
        node: Optional[dict] = None, gpus: int = 0, extra: Optional[dict] = None,
        run_as: Optional[int] = None) -> dict:
    """A pod; with `run_as` it runs as that user and group and passes `restricted`."""
    container = copy.deepcopy(container)
    resources = container.setdefault("resources", {})
    resources.setdefault("requests", {"cpu": "100m", "memory": "128Mi"})
    if gpus:
        resources.setdefault("limits", {})[GPU_RESOURCE] = gpus
    container.setdefault("securityContext", _container_security())
    spec: dict = {
        "restartPolicy": "Never",
        "activeDeadlineSeconds": deadline,
        "automountServiceAccountToken": False,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
    }
    if run_as is not None:
        spec["securityContext"].update(runAsNonRoot=True, runAsUser=run_as, runAsGroup=run_as)
    if gpus:
        spec["runtimeClassName"] = RUNTIME_CLASS
    else:
        # No GPUs for this pod even where nvidia is the default runtime.
        container.setdefault("env", []).append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"})
    if node is not None:
        spec["nodeSelector"] = {HOSTNAME_LABEL: node["metadata"]["name"]}
        if tolerations(node):
            spec["tolerations"] = tolerations(node)
    spec.update(extra or {})
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": labels(run_id, component)},
            "spec": spec}


def cuda_smoke(name, ns, run_id, node, gpus, deadline) -> dict:
    # The image's default command runs vectorAdd; it prints "Test PASSED". It needs only the
    # GPUs' device nodes, which the driver makes readable by every user (its module option
    # NVreg_DeviceFileMode, 0666 by default: NVIDIA driver README, "Configuring ... Device
    # File Permissions"), so it runs as nobody.
    return pod(name, ns, run_id, "cuda-smoke", {"name": "vector-add",
                                                 "image": images.CUDA_SAMPLE_IMAGE},
               deadline, node, gpus, run_as=NOBODY)


DCGM_SCRIPT = """\
set -u
nv-hostengine >/dev/null || { echo "FAIL: nv-hostengine did not start" >&2; exit 1; }
dcgmi diag -r "$LEVEL"
"""


def dcgm_diag(name, ns, run_id, node, gpus, level, deadline) -> dict:
    # The diagnostic reads GPU counters only a privileged client may: NVIDIA's DCGM container
    # docs run it with `--cap-add SYS_ADMIN` (docs.nvidia.com/datacenter/dcgm, "Getting
    # Started", containers). No Pod Security level but privileged admits SYS_ADMIN
    # (pod-security-admission policy/check_capabilities_baseline.go): the host namespace.
    return pod(name, ns, run_id, "dcgm-diag", {
        "name": "dcgmi", "image": images.DCGM_IMAGE, "command": ["sh", "-c", DCGM_SCRIPT],
        "env": [{"name": "LEVEL", "value": str(level)}],
        "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}},
        "securityContext": _container_security(["SYS_ADMIN"])}, deadline, node, gpus)


def nccl_node(name, ns, run_id, node, gpus, deadline) -> dict:
    # One process drives every GPU of the node (-g), so no mpirun: the MPI=1 build then runs
    # as an MPI singleton, as the image's non-root user (root would need OpenMPI's
    # OMPI_ALLOW_RUN_AS_ROOT pair: mpirun(1) --allow-run-as-root).
    return pod(name, ns, run_id, "nccl-node", {
        "name": "all-reduce", "image": images.NCCL_TESTS_IMAGE,
        "command": [ALL_REDUCE_PERF, "-b", "8", "-e", "8G", "-f", "2", "-g", str(gpus)],
        "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]},
        deadline, node, gpus,
        # NCCL shares memory between the GPUs' threads; the runtime's 64Mi is too small.
        {"volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]}, run_as=MPI_UID)


def iperf3_server(name, ns, run_id, node, deadline) -> dict:
    # On the host network: the link the fabric MPIJob's NCCL sockets use between GPU nodes is
    # measured (baseline refuses hostNetwork: the host namespace).
    return pod(name, ns, run_id, "iperf3-server", {
        "name": "iperf3", "image": images.IPERF3_IMAGE,
        "command": ["iperf3", "-s", "-1", "-p", str(IPERF3_PORT)]}, deadline, node,
        extra={"hostNetwork": True})


def iperf3_client(name, ns, run_id, node, server_address, deadline) -> dict:
    return pod(name, ns, run_id, "iperf3-client", {
        "name": "iperf3", "image": images.IPERF3_IMAGE,
        "command": ["iperf3", "-c", server_address, "-p", str(IPERF3_PORT), "-t", "10",
                    "-P", "4", "-J"]}, deadline, node, extra={"hostNetwork": True})


def claim(name, ns, run_id, storage_class, access_mode, size="2Gi") -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": ns, "labels": labels(run_id, "storage")},
            "spec": {"storageClassName": storage_class, "accessModes": [access_mode],
                     "resources": {"requests": {"storage": size}}}}


RWX_SCRIPT = """\
set -eu
echo "$NODE_NAME" > "/data/.from-$ME.tmp" && mv "/data/.from-$ME.tmp" "/data/from-$ME"
end=$(($(date +%s) + WAIT_SECONDS))
while [ ! -s "/data/from-$PEER" ]; do
  [ "$(date +%s)" -lt "$end" ] || { echo "FAIL: /data/from-$PEER did not appear" >&2; exit 1; }
  sleep 2
done
echo "node $NODE_NAME read from-$PEER, written on node $(cat "/data/from-$PEER")"
"""


def rwx_pod(name, ns, run_id, me, peer, claim_name, node, deadline) -> dict:
    # Every backend's provisioner (nfs-subdir for nfs and efs, local-path) makes the
    # volume's folder world-writable, so nobody may write there.
    volume = {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]}
    return pod(name, ns, run_id, "storage-rwx", {
        "name": "write-read", "image": images.BUSYBOX_IMAGE, "command": ["sh", "-c", RWX_SCRIPT],
        "env": [{"name": "ME", "value": me}, {"name": "PEER", "value": peer},
                {"name": "WAIT_SECONDS", "value": str(max(deadline - 30, 30))},
                {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
        "securityContext": {**_container_security(), "readOnlyRootFilesystem": True},
        "volumeMounts": [{"name": "data", "mountPath": "/data"}]}, deadline, node, extra=volume,
        run_as=NOBODY)


def fio_pod(name, ns, run_id, claim_name, size_mib, node, deadline) -> dict:
    # Sequential write (flushed before its clock stops) then sequential read, 1 MiB blocks.
    command = ["fio", "--output-format=json", "--directory=/data", f"--size={size_mib}M",
               "--bs=1M", "--ioengine=psync", "--end_fsync=1",
               "--name=write", "--rw=write", "--name=read", "--stonewall", "--rw=read"]
    return pod(name, ns, run_id, "storage-fio", {
        "name": "fio", "image": images.FIO_IMAGE, "command": command,
        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"},
                      "limits": {"memory": "1Gi"}},
        "volumeMounts": [{"name": "data", "mountPath": "/data"}]}, deadline, node,
        extra={"volumes": [{"name": "data",
                            "persistentVolumeClaim": {"claimName": claim_name}}]},
        # The claim's folder is world-writable (rwx_pod).
        run_as=NOBODY)


def mpijob(rendered: dict, ns: str, run_id: str) -> dict:
    """The acceptance MPIJob the preview rendered (acceptance/mpi_benchmark.py), moved into the
    run's namespace and labelled as the run's; its pods keep their own labels (the workers'
    anti-affinity selects them) and get the run's too."""
    job = copy.deepcopy(rendered)
    job["metadata"]["namespace"] = ns
    job["metadata"].setdefault("labels", {})[RUN_LABEL] = run_id
    for replica in (job["spec"].get("mpiReplicaSpecs") or {}).values():
        template = replica.setdefault("template", {})
        template.setdefault("metadata", {}).setdefault("labels", {})[RUN_LABEL] = run_id
    # This run removes it; the TTL would keep the finished job for an hour.
    job["spec"].get("runPolicy", {}).pop("ttlSecondsAfterFinished", None)
    return job


def nccl_net(job: dict) -> Optional[str]:
    """The network the MPIJob tells NCCL to use (NCCL_NET of its launcher), IB or Socket."""
    for replica in (job["spec"].get("mpiReplicaSpecs") or {}).values():
        for container in replica["template"]["spec"].get("containers") or []:
            for env in container.get("env") or []:
                if env.get("name") == "NCCL_NET":
                    return env.get("value")
    return None
