"""mpijob-benchmark.yaml: an MPIJob running NCCL's own benchmark, nccl-tests' `all_reduce_perf`,
with one worker per GPU host and one rank per GPU, with the stack's NCCL settings. The launcher
fails unless the run finishes with correct results and, with `mpi.nccl.infiniband`, NCCL
reports its IB transport; acceptance/nccl_results.py reads the same log outside the cluster."""

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


MPI_JOB_NAME = "nccl-tests"


# The workers' sshd: on the host network port 22 belongs to the host's own sshd.
MPI_SSH_PORT = 2222


# Where the pinned image builds nccl-tests with MPI support (coreweave/nccl-tests Dockerfile:
# `WORKDIR /opt/nccl-tests` then `make MPI=1`, whose binaries land in build/).
ALL_REDUCE_PERF = "/opt/nccl-tests/build/all_reduce_perf"


# 8 B to 8 GiB, doubling, one GPU per rank (NVIDIA/nccl-tests README). all_reduce_perf lowers
# the top size itself when a GPU has too little memory (src/common.cu "Reducing maxBytes").
ALL_REDUCE_ARGS = ("-b", "8", "-e", "8G", "-f", "2", "-g", "1")


# The launcher runs mpirun (its argv are the container's args) and then judges the log:
# all_reduce_perf exits non-zero on wrong results (src/common.cu, end of main), the footer
# must say "Out of bounds values : 0 OK" and give the average bus bandwidth, and with
# CHECK_NETWORK set every "Using network" line must name that network and, across several
# nodes, every "via NET/<name>/" connection too. acceptance/nccl_results.py applies the same
# rules in Python; tests/acceptance run both on the same logs.
LAUNCHER_SCRIPT = """\
set -u
log="${TMPDIR:-/tmp}/all_reduce_perf.log"
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
"$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
[ "$status" -eq 0 ] || fail "all_reduce_perf exited with status $status (its output is above)"
grep -q '^# Out of bounds values : 0 OK' "$log" \\
  || fail "all_reduce_perf did not report 'Out of bounds values : 0 OK'"
avg=$(sed -n 's/^# Avg bus bandwidth *: *\\([0-9][0-9.eE+-]*\\).*/\\1/p' "$log" | tail -n 1)
[ -n "$avg" ] || fail "no '# Avg bus bandwidth' line: all_reduce_perf did not finish"
networks=$(sed -n 's/.*NCCL INFO Using network \\([^ ]*\\).*/\\1/p' "$log" | sort -u | paste -sd, -)
links=$(sed -n 's/.*NCCL INFO Channel .* via NET\\/\\([^/ ]*\\)\\/.*/\\1/p' "$log" | sort -u | paste -sd, -)
if [ -n "$CHECK_NETWORK" ]; then
  [ "$networks" = "$CHECK_NETWORK" ] \\
    || fail "NCCL did not use only network $CHECK_NETWORK (saw: ${networks:-no 'Using network' line})"
  if [ "$CHECK_NODES" -gt 1 ] && [ "$links" != "$CHECK_NETWORK" ]; then
    fail "connections between nodes not all via NET/$CHECK_NETWORK (saw: ${links:-no connection between nodes})"
  fi
fi
gdr="not used"
if grep -q 'via NET/[^ ]*/GDRDMA' "$log"; then
  gdr="used"
fi
awk '$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && NF == 13 { row = $0 }
  END {
    split(row, f, " ")
    printf "largest message %s B: out-of-place algbw %s GB/s busbw %s GB/s, in-place algbw %s GB/s busbw %s GB/s\\n", f[1], f[7], f[8], f[11], f[12]
  }' "$log"
echo "average bus bandwidth $avg GB/s"
echo "NCCL transport: ${networks:-not logged (NCCL_DEBUG below INFO)}; between nodes: ${links:-none}; GPUDirect RDMA: $gdr"
echo "PASS"
"""


# Each worker runs sshd for mpirun. With InfiniBand it first proves the RDMA device plugin
# gave it the verbs devices. Registered (pinned) memory counts against RLIMIT_MEMLOCK unless
# the process has CAP_IPC_LOCK (Linux drivers/infiniband/core/umem.c, ib_umem_get), which the
# workers get; Kubernetes has no field for rlimits (the hard limit is the container runtime's),
# so the soft limit is raised to the hard one and both are logged. sshd's sessions, and so the
# ranks, inherit both.
WORKER_SCRIPT = """\
set -eu
if [ "$RDMA" = "true" ]; then
  if ! ls /dev/infiniband/uverbs* >/dev/null 2>&1; then
    echo "FAIL: node $NODE_NAME: no /dev/infiniband/uverbs* in the worker; $RDMA_RESOURCE did not provide an RDMA device" >&2
    exit 1
  fi
  echo "RDMA devices: $(cd /dev/infiniband && echo *)"
fi
ulimit -S -l "$(ulimit -H -l)"
echo "memlock limit (KiB): soft $(ulimit -S -l), hard $(ulimit -H -l)"
mkdir -p /run/sshd
ssh-keygen -A >/dev/null
exec /usr/sbin/sshd -De -p "$SSH_PORT" -o ListenAddress="$POD_IP" -o StrictModes=no
"""


def nccl_socket_interface(settings: StackConfig) -> Optional[str]:
    """mpi.nccl.socketInterface, else the GPU hosts' `interface` when they all share one."""
    if settings.mpi.nccl.socket_interface:
        return settings.mpi.nccl.socket_interface
    interfaces = {host.interface for host in gpu_hosts(settings)}
    if len(interfaces) == 1 and None not in interfaces:
        return interfaces.pop()
    return None


def nccl_env(settings: StackConfig) -> list[dict]:
    """NCCL's settings for every rank (NCCL docs, "Environment Variables").

    NCCL_NET names the one network NCCL may use: with it NCCL fails ("Failed to initialize any
    NET plugin") instead of falling back from IB to sockets (NCCL v2.30.4-1 src/init.cc:2007,
    src/plugin/net.cc:315). NCCL_NET_PLUGIN=none keeps NCCL to its built-in IB and Socket
    transports: the image's HPC-X directory holds a libnccl-net.so (the SHARP plugin, network
    "IBext_v*") that NCCL would otherwise load (src/plugin/net.cc:246-258); CoreWeave's own
    MPIJob examples for this image set the same."""
    nccl = settings.mpi.nccl
    env = [
        {"name": "NCCL_DEBUG", "value": nccl.debug},
        {"name": "NCCL_IB_DISABLE", "value": "0" if nccl.infiniband else "1"},
        {"name": "NCCL_NET", "value": "IB" if nccl.infiniband else "Socket"},
        {"name": "NCCL_NET_PLUGIN", "value": "none"},
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
    """mpirun's argv (the launcher script runs it), ending with all_reduce_perf's."""
    workers, slots = mpi_layout(settings)
    lan, pods = settings.network.lan_cidr, settings.network.pod_cidr
    args = ["mpirun", "--allow-run-as-root", "-np", str(workers * slots),
            "-bind-to", "none", "-map-by", "slot"]
    # Ranks start in ssh sessions, which do not inherit the worker container's environment.
    for name in [e["name"] for e in nccl_env(settings)] + ["LD_LIBRARY_PATH", "PATH"]:
        args += ["-x", name]
    args += [
        # The image's OpenMPI (HPC-X, built with the mellanox/optimized platform) reads a
        # system-wide parameter file (`btl = self`, and in some HPC-X releases a
        # btl_tcp_if_exclude, which with btl_tcp_if_include below would switch the TCP
        # transport off: open-mpi/ompi v4.1.8 opal/mca/btl/tcp/btl_tcp_component.c:383).
        # "none" skips it (opal/mca/base/mca_base_var.c:455); everything needed is set here.
        "-mca", "mca_base_param_files", "none",
        # MPI itself only carries nccl-tests' bootstrap and result exchange: plain TCP, no
        # UCX or HCOLL (which would probe the HCAs themselves).
        "-mca", "pml", "ob1", "-mca", "btl", "self,vader,tcp", "-mca", "coll_hcoll_enable", "0",
        # MPI traffic between ranks stays on the LAN; mpirun's control channel also needs
        # the pod network, where the launcher runs. Other host interfaces (CNI tunnels,
        # bridges) are left out.
        "-mca", "btl_tcp_if_include", lan,
        "-mca", "oob_tcp_if_include", f"{lan},{pods}",
        # The operator's Secret volume is read-only, so no known_hosts can be written there.
        "-mca", "plm_rsh_args", (f"-p {MPI_SSH_PORT} -o ConnectionAttempts=10 "
                                 "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"),
        ALL_REDUCE_PERF, *ALL_REDUCE_ARGS,
    ]
    return args


def mpi_benchmark(settings: StackConfig) -> dict:
    hosts = gpu_hosts(settings)
    workers, slots = mpi_layout(settings)
    nccl = settings.mpi.nccl
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
            "image": versions.NCCL_TESTS_IMAGE,
            "command": ["bash", "-c", LAUNCHER_SCRIPT, "launcher"],
            "args": mpirun_args(settings),
            # NCCL_* are exported to the ranks by mpirun -x; CHECK_* tell the script what to
            # require of the log.
            "env": [*env,
                    {"name": "CHECK_NETWORK", "value": "IB" if nccl.infiniband else ""},
                    {"name": "CHECK_NODES", "value": str(workers)}],
            "resources": {"requests": {"cpu": "250m", "memory": "256Mi"},
                          "limits": {"memory": "1Gi"}},
            "securityContext": restricted_container(),
        }],
    }
    if all_taints:
        launcher_spec["tolerations"] = tolerations(all_taints)

    limits = {GPU_RESOURCE: slots}
    worker_container = {
        "name": "worker",
        "image": versions.NCCL_TESTS_IMAGE,
        # The operator mounts its SSH keys from a Secret at /root/.ssh; like the operator's
        # own images, sshd skips StrictModes' checks of that folder. It listens on this
        # node's cluster address only.
        "command": ["bash", "-c", WORKER_SCRIPT],
        "env": [*env,
                {"name": "RDMA", "value": "true" if nccl.infiniband else "false"},
                {"name": "RDMA_RESOURCE", "value": nccl.rdma_resource},
                {"name": "SSH_PORT", "value": str(MPI_SSH_PORT)},
                {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "ports": [{"name": "ssh", "containerPort": MPI_SSH_PORT, "protocol": "TCP"}],
        # The launcher starts once every worker is Ready, i.e. accepts SSH.
        "readinessProbe": {"tcpSocket": {"port": MPI_SSH_PORT},
                           "periodSeconds": 5, "failureThreshold": 3},
        # No memory limit: an out-of-memory kill would be a false failure.
        "resources": {"requests": {"cpu": str(slots), "memory": f"{2 * slots}Gi"},
                      "limits": limits},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    if nccl.infiniband:
        # The RDMA device plugin puts the HCAs' verbs devices (/dev/infiniband) into the
        # container; an extended resource is asked for in limits (requests follow). IPC_LOCK
        # lets the ranks pin their buffers for the HCAs (NVIDIA network-operator's and
        # k8s-rdma-shared-dev-plugin's example pods ask for both).
        limits[nccl.rdma_resource] = 1
        worker_container["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}

    worker_spec = {
        "automountServiceAccountToken": False,
        "runtimeClassName": RUNTIME_CLASS,
        # NCCL_SOCKET_IFNAME names a host NIC, and NCCL should use the hosts' network (and
        # their IPoIB/RoCE interfaces), not the CNI's overlay: workers use the host network.
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
        "containers": [worker_container],
        # NCCL shares memory between the ranks of a node; the runtime's 64Mi is too small.
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
    }
    if gpu_taints:
        worker_spec["tolerations"] = tolerations(gpu_taints)

    transport = (f"over InfiniBand ({nccl.rdma_resource} per worker; fails unless NCCL "
                 "reports its IB transport)" if nccl.infiniband else "over TCP sockets")
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {
            "name": MPI_JOB_NAME,
            "namespace": NAMESPACE,
            "labels": component_labels("mpi-benchmark"),
            "annotations": {ANNOTATION_CHECK: (
                f"nccl-tests all_reduce_perf on {workers * slots} GPUs: {workers} worker(s) x "
                f"{slots} rank(s), NCCL {transport}; the launcher log ends with the "
                "algorithm and bus bandwidth and PASS")},
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
