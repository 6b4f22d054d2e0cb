"""mpijob-benchmark.yaml: an MPIJob running Horovod's synthetic PyTorch benchmark on one
worker per GPU host, with the stack's NCCL settings."""

from typing import Optional

from acceptance.common import (
    ANNOTATION_CHECK,
    GPU_RESOURCE,
    HOSTNAME_LABEL,
    NAMESPACE,
    RUNTIME_CLASS,
    TTL_SECONDS,
    component_labels,
    gpu_hosts,
    restricted_container,
    tolerations,
    workload_hosts,
)
from config import versions
from config.model import StackConfig


MPI_FILE = "mpijob-benchmark.yaml"


MPI_DEADLINE_SECONDS = 3600


MPI_JOB_NAME = "horovod-benchmark"


# The workers' sshd: on the host network port 22 belongs to the host's own sshd.
MPI_SSH_PORT = 2222


BENCHMARK_SCRIPT = "/horovod/examples/pytorch/pytorch_synthetic_benchmark.py"


BENCHMARK_ARGS = ("--model", "resnet50", "--batch-size", "32", "--num-warmup-batches", "10",
                  "--num-batches-per-iter", "10", "--num-iters", "10")


# Each MPI rank runs this first: Horovod's benchmark silently falls back to the CPU when
# PyTorch sees no GPU, which must fail the check instead.
CUDA_CHECK = (
    "import os, socket, sys, torch; "
    "need = int(os.environ.get('OMPI_COMM_WORLD_LOCAL_SIZE', '1')); "
    "have = torch.cuda.device_count(); "
    "sys.exit(0 if have >= need else "
    "f'FAIL: {socket.gethostname()}: PyTorch sees {have} CUDA device(s) for {need} local rank(s)')"
)


def nccl_socket_interface(settings: StackConfig) -> Optional[str]:
    """mpi.nccl.socketInterface, else the GPU hosts' `interface` when they all share one."""
    if settings.mpi.nccl.socket_interface:
        return settings.mpi.nccl.socket_interface
    interfaces = {host.interface for host in gpu_hosts(settings)}
    if len(interfaces) == 1 and None not in interfaces:
        return interfaces.pop()
    return None


def nccl_env(settings: StackConfig) -> list[dict]:
    nccl = settings.mpi.nccl
    env = [
        {"name": "NCCL_DEBUG", "value": nccl.debug},
        {"name": "NCCL_IB_DISABLE", "value": "0" if nccl.infiniband else "1"},
    ]
    interface = nccl_socket_interface(settings)
    if interface:
        env.append({"name": "NCCL_SOCKET_IFNAME", "value": interface})
    return env


def mpi_layout(settings: StackConfig) -> tuple[int, int]:
    """(workers, slots per worker): one worker per GPU host, as many ranks as the smallest
    host has GPUs."""
    hosts = gpu_hosts(settings)
    return len(hosts), min(host.gpus for host in hosts)


def mpirun_args(settings: StackConfig) -> list[str]:
    workers, slots = mpi_layout(settings)
    lan, pods = settings.network.lan_cidr, settings.network.pod_cidr
    args = ["--allow-run-as-root", "-np", str(workers * slots),
            "-bind-to", "none", "-map-by", "slot"]
    # Ranks start in ssh sessions, which do not inherit the worker container's environment.
    for name in [e["name"] for e in nccl_env(settings)] + ["LD_LIBRARY_PATH", "PATH"]:
        args += ["-x", name]
    args += [
        "-mca", "pml", "ob1", "-mca", "btl", "^openib",
        # MPI traffic between ranks stays on the LAN; mpirun's control channel also needs
        # the pod network, where the launcher runs. Other host interfaces (CNI tunnels,
        # bridges) are left out.
        "-mca", "btl_tcp_if_include", lan,
        "-mca", "oob_tcp_if_include", f"{lan},{pods}",
        # The operator's Secret volume is read-only, so no known_hosts can be written there.
        "-mca", "plm_rsh_args", (f"-p {MPI_SSH_PORT} -o ConnectionAttempts=10 "
                                 "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"),
        "bash", "-c",
        f'python -c "{CUDA_CHECK}" && exec python {BENCHMARK_SCRIPT} {" ".join(BENCHMARK_ARGS)}',
    ]
    return args


def mpi_benchmark(settings: StackConfig) -> dict:
    hosts = gpu_hosts(settings)
    workers, slots = mpi_layout(settings)
    env = nccl_env(settings)
    all_taints = [taint for host in workload_hosts(settings) for taint in host.taints]
    gpu_taints = [taint for host in hosts for taint in host.taints]
    worker_labels = component_labels("mpi-worker")
    seccomp = {"seccompProfile": {"type": "RuntimeDefault"}}

    # The launcher stays on the pod network: on the host network of a worker's node, OpenMPI
    # would take that worker's address for its own and start its ranks in the launcher.
    launcher_spec = {
        "automountServiceAccountToken": False,
        "securityContext": seccomp,
        "containers": [{
            "name": "launcher",
            "image": versions.HOROVOD_IMAGE,
            "command": ["mpirun"],
            "args": mpirun_args(settings),
            # Exported to the ranks by mpirun -x.
            "env": env,
            "resources": {"requests": {"cpu": "250m", "memory": "256Mi"},
                          "limits": {"memory": "1Gi"}},
            "securityContext": restricted_container(),
        }],
    }
    if all_taints:
        launcher_spec["tolerations"] = tolerations(all_taints)

    worker_spec = {
        "automountServiceAccountToken": False,
        "runtimeClassName": RUNTIME_CLASS,
        # NCCL_SOCKET_IFNAME names a host NIC, and NCCL should use the hosts' network, not
        # the CNI's overlay: workers use the host network.
        "hostNetwork": True,
        "dnsPolicy": "ClusterFirstWithHostNet",
        "securityContext": seccomp,
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{
                    "key": HOSTNAME_LABEL, "operator": "In",
                    "values": [host.name for host in hosts]}]}]}},
            # One worker per GPU host.
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": dict(worker_labels)},
                "topologyKey": HOSTNAME_LABEL}]},
        },
        "containers": [{
            "name": "worker",
            "image": versions.HOROVOD_IMAGE,
            # The operator mounts its SSH keys from a Secret at /root/.ssh; like the
            # operator's own images, sshd skips StrictModes' checks of that folder. It
            # listens on this node's cluster address only.
            "command": ["bash", "-c",
                        f'mkdir -p /run/sshd && exec /usr/sbin/sshd -De -p {MPI_SSH_PORT} '
                        '-o ListenAddress="$POD_IP" -o StrictModes=no'],
            "env": [*env, {"name": "POD_IP",
                           "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
            "ports": [{"name": "ssh", "containerPort": MPI_SSH_PORT, "protocol": "TCP"}],
            # The launcher starts once every worker is Ready, i.e. accepts SSH.
            "readinessProbe": {"tcpSocket": {"port": MPI_SSH_PORT},
                               "periodSeconds": 5, "failureThreshold": 3},
            # No memory limit: an out-of-memory kill would be a false failure.
            "resources": {"requests": {"cpu": str(slots), "memory": f"{2 * slots}Gi"},
                          "limits": {GPU_RESOURCE: slots}},
            "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
        }],
        # NCCL shares memory between the ranks of a node; the runtime's 64Mi is too small.
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
    }
    if gpu_taints:
        worker_spec["tolerations"] = tolerations(gpu_taints)

    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {
            "name": MPI_JOB_NAME,
            "namespace": NAMESPACE,
            "labels": component_labels("mpi-benchmark"),
            "annotations": {ANNOTATION_CHECK: (
                f"Horovod's synthetic PyTorch benchmark on {workers * slots} GPUs: {workers} "
                f"worker(s) x {slots} rank(s), NCCL between nodes; the launcher log ends with "
                "the total img/sec")},
        },
        "spec": {
            "slotsPerWorker": slots,
            "launcherCreationPolicy": "WaitForWorkersReady",
            "runPolicy": {
                "cleanPodPolicy": "Running",
                "backoffLimit": 0,
                "activeDeadlineSeconds": MPI_DEADLINE_SECONDS,
                "ttlSecondsAfterFinished": TTL_SECONDS,
            },
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    "restartPolicy": "Never",
                    "template": {"metadata": {"labels": component_labels("mpi-launcher")},
                                 "spec": launcher_spec},
                },
                "Worker": {
                    "replicas": workers,
                    "restartPolicy": "Never",
                    "template": {"metadata": {"labels": worker_labels}, "spec": worker_spec},
                },
            },
        },
    }

