"""mpijob-team-<team>.yaml: the acceptance MPIJob a researcher could have written, in the
team's own namespace under Pod Security `restricted` (components/common/pod_security.py). Two
workers on two GPU nodes, one GPU each by request, run nccl-tests' all_reduce_perf with NCCL
over TCP sockets on the pod network; nothing runs as root, no capability is kept, no host
namespace is used. It proves that a multi-node GPU job works under the teams' default policy;
the fabric benchmark (mpijob-benchmark.yaml) measures the hosts' NICs from the admin's
namespace instead.

Non-root MPI follows the MPI operator's own example for it (kubeflow/mpi-operator v0.8.0,
examples/v2beta1/pi/pi.yaml:10 `sshAuthMountPath: /home/mpiuser/.ssh`, :19-20 and :38-39
`runAsUser: 1000`, :40-45 the worker runs `/usr/sbin/sshd -De -f ~/.sshd_config`;
build/base/sshd_config:1-3 `PidFile` in the user's home, `HostKey ~/.ssh/id_rsa`,
`StrictModes no`; build/base/Dockerfile:3 and :31 port 2222). Away from /root/.ssh the
operator mounts its SSH Secret with the default mode, 0644 and owned by root
(pkg/controller/mpi_job_controller.go:1766-1767 sets 0600 only for /root/.ssh), which
OpenSSH accepts from a user that does not own the file."""

from acceptance.common import (
    ANNOTATION_CHECK,
    GPU_RESOURCE,
    HOSTNAME_LABEL,
    RUNTIME_CLASS,
    TTL_SECONDS,
    component_labels,
    gpu_hosts,
    tolerations,
    workload_taints,
)
from acceptance.mpi_benchmark import ALL_REDUCE_PERF, LAUNCHER_SCRIPT, MPI_DEADLINE_SECONDS
from config import versions
from config.access import Team
from config.model import StackConfig

TEAM_FILE = "mpijob-team-{team}.yaml"
TEAM_JOB_NAME = "nccl-team-check"
# Kueue's label naming the LocalQueue (components/access/queues.py: one per team, its name).
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# The pinned image is built FROM nvidia/cuda:*-devel-ubuntu24.04 (coreweave/nccl-tests
# Dockerfile), whose ubuntu:24.04 base ships the user `ubuntu`, uid and gid 1000, home
# /home/ubuntu (https://bugs.launchpad.net/cloud-images/+bug/2005129). ssh and sshd need the
# uid in /etc/passwd; the worker checks it and says so when an image lacks it.
MPI_UID = 1000
MPI_HOME = "/home/ubuntu"
# Above 1024: a user without capabilities may listen there.
SSH_PORT = 2222
# With Kubeflow a team's namespace is a profile's, which Kubeflow's profile controller labels
# istio-injection: enabled (kubeflow/kubeflow v1.10.0 components/profile-controller/
# controllers/profile_controller.go:132). A sidecar would intercept the ranks' ssh and NCCL
# connections and keep the launcher's Job from completing: the pods opt out by Istio's pod
# label (istio.io/latest/docs/setup/additional-setup/sidecar-injection/, "Controlling the
# injection policy"). It changes nothing where Istio is not installed.
NO_SIDECAR = {"sidecar.istio.io/inject": "false"}
# Two nodes prove the path between nodes; more add nothing to what restricted admits.
MAX_WORKERS = 2
# Up to 1 GiB: over the pod network the check is that NCCL works, not how fast.
ALL_REDUCE_ARGS = ("-b", "8", "-e", "1G", "-f", "2", "-g", "1")

# The worker's sshd as the user: its own config (the image's /etc/ssh/sshd_config is root's),
# the operator's key as host key and for authorized_keys, pid file and config under /tmp.
WORKER_SCRIPT = """\
set -eu
fail() {
  echo "FAIL: node $NODE_NAME: $*" >&2
  exit 1
}
entry=$(getent passwd "$(id -u)") \\
  || fail "uid $(id -u) has no entry in the image's /etc/passwd; ssh and sshd need one"
home=$(printf '%s' "$entry" | cut -d: -f6)
[ "$home" = "$MPI_HOME" ] || fail "uid $(id -u)'s home is $home, not $MPI_HOME where the keys are"
[ -r "$MPI_HOME/.ssh/id_rsa" ] || fail "the MPI operator's key $MPI_HOME/.ssh/id_rsa is not readable"
config=/tmp/sshd_config
cat > "$config" <<EOF
Port $SSH_PORT
ListenAddress $POD_IP
PidFile /tmp/sshd.pid
HostKey $MPI_HOME/.ssh/id_rsa
AuthorizedKeysFile $MPI_HOME/.ssh/authorized_keys
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
EOF
echo "sshd as $(id -un) (uid $(id -u)) on $POD_IP:$SSH_PORT"
exec /usr/sbin/sshd -De -f "$config"
"""


def team_nccl_env(settings: StackConfig) -> list[dict]:
    """NCCL over its Socket transport only (NCCL_NET fails instead of falling back; see
    acceptance/mpi_benchmark.py nccl_env). No NCCL_SOCKET_IFNAME: in a pod NCCL's default,
    every interface but lo and docker* (NCCL docs, NCCL_SOCKET_IFNAME), is the pod's one."""
    return [{"name": "NCCL_DEBUG", "value": settings.mpi.nccl.debug},
            {"name": "NCCL_IB_DISABLE", "value": "1"},
            {"name": "NCCL_NET", "value": "Socket"},
            {"name": "NCCL_NET_PLUGIN", "value": "none"}]


def team_workers(settings: StackConfig, team: Team) -> int:
    """Workers (one GPU each): two GPU nodes where there are, within the team's GPU quota."""
    nodes = len(gpu_hosts(settings)) + sum(p.count for p in settings.pools if p.gpus)
    quota = team.quota
    allowed = nodes if quota.gpus is None else quota.gpus + quota.borrow_gpus
    return min(MAX_WORKERS, nodes, allowed)


def team_mpirun_args(settings: StackConfig, workers: int) -> list[str]:
    pods = settings.network.pod_cidr
    args = ["mpirun", "-np", str(workers), "-bind-to", "none", "-map-by", "slot"]
    for name in [e["name"] for e in team_nccl_env(settings)] + ["LD_LIBRARY_PATH", "PATH"]:
        args += ["-x", name]
    args += [
        # As the fabric benchmark (acceptance/mpi_benchmark.py mpirun_args): no HPC-X
        # parameter file, plain TCP for MPI's own messages, here all on the pod network.
        "-mca", "mca_base_param_files", "none",
        "-mca", "pml", "ob1", "-mca", "btl", "self,tcp", "-mca", "coll_hcoll_enable", "0",
        "-mca", "btl_tcp_if_include", pods, "-mca", "oob_tcp_if_include", pods,
        "-mca", "plm_rsh_args", (f"-p {SSH_PORT} -o ConnectionAttempts=10 "
                                 "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"),
        ALL_REDUCE_PERF, *ALL_REDUCE_ARGS,
    ]
    return args


def restricted_pod_security() -> dict:
    """The pod's part of restricted (pod-security-admission policy/check_runAsNonRoot.go,
    check_seccompProfile_restricted.go)."""
    return {"runAsNonRoot": True, "runAsUser": MPI_UID, "runAsGroup": MPI_UID,
            "seccompProfile": {"type": "RuntimeDefault"}}


def restricted_container_security() -> dict:
    """The container's part (check_allowPrivilegeEscalation.go,
    check_capabilities_restricted.go)."""
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def _pod_spec(containers: list[dict], extra_volumes: list[dict]) -> dict:
    return {"automountServiceAccountToken": False,
            "securityContext": restricted_pod_security(),
            "containers": containers,
            **({"volumes": extra_volumes} if extra_volumes else {})}


def team_mpijob(settings: StackConfig, team: Team, workers: int) -> dict:
    env = team_nccl_env(settings)
    taints = tolerations(workload_taints(settings))
    worker_labels = component_labels("mpi-team-worker")
    launcher = _pod_spec([{
        "name": "launcher", "image": versions.NCCL_TESTS_IMAGE,
        "command": ["bash", "-c", LAUNCHER_SCRIPT, "launcher"],
        "args": team_mpirun_args(settings, workers),
        "env": [*env, {"name": "CHECK_NETWORK", "value": "Socket"},
                {"name": "CHECK_NODES", "value": str(workers)}],
        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"},
                      "limits": {"cpu": "1", "memory": "1Gi"}},
        "securityContext": restricted_container_security(),
    }], [])
    worker = _pod_spec([{
        "name": "worker", "image": versions.NCCL_TESTS_IMAGE,
        "command": ["bash", "-c", WORKER_SCRIPT],
        "env": [*env,
                {"name": "MPI_HOME", "value": MPI_HOME},
                {"name": "SSH_PORT", "value": str(SSH_PORT)},
                {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "ports": [{"name": "ssh", "containerPort": SSH_PORT, "protocol": "TCP"}],
        # The launcher starts once every worker is Ready, i.e. accepts SSH.
        "readinessProbe": {"tcpSocket": {"port": SSH_PORT}, "periodSeconds": 5,
                           "failureThreshold": 3},
        "resources": {"requests": {"cpu": "1", "memory": "2Gi"},
                      "limits": {GPU_RESOURCE: 1, "cpu": "2", "memory": "4Gi"}},
        "securityContext": restricted_container_security(),
        # NCCL's shared memory; the runtime's 64Mi is small.
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }], [{"name": "dshm", "emptyDir": {"medium": "Memory"}}])
    worker["runtimeClassName"] = RUNTIME_CLASS
    # One worker per node: the ranks talk across nodes.
    worker["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": dict(worker_labels)}, "topologyKey": HOSTNAME_LABEL}]}}
    if taints:
        launcher["tolerations"] = taints
        worker["tolerations"] = taints
    labels = component_labels("mpi-team-check")
    if settings.access.queues:
        labels[QUEUE_LABEL] = team.name
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {
            "name": TEAM_JOB_NAME, "namespace": team.name, "labels": labels,
            "annotations": {ANNOTATION_CHECK: (
                f"nccl-tests all_reduce_perf on {workers} GPU(s), one per node, in team "
                f"{team.name}'s namespace under Pod Security restricted: non-root sshd, no "
                "capabilities, NCCL over TCP sockets on the pod network; the launcher log "
                "ends with PASS")},
        },
        "spec": {
            "slotsPerWorker": 1,
            "sshAuthMountPath": f"{MPI_HOME}/.ssh",
            "launcherCreationPolicy": "WaitForWorkersReady",
            "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 0,
                          "activeDeadlineSeconds": MPI_DEADLINE_SECONDS,
                          "ttlSecondsAfterFinished": TTL_SECONDS},
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "restartPolicy": "Never",
                             "template": {"metadata": {"labels": {
                                 **component_labels("mpi-team-launcher"), **NO_SIDECAR}},
                                          "spec": launcher}},
                "Worker": {"replicas": workers, "restartPolicy": "Never",
                           "template": {"metadata": {"labels": {**worker_labels, **NO_SIDECAR}},
                                        "spec": worker}},
            },
        },
    }


def team_checks(settings: StackConfig) -> dict[str, list[dict]]:
    """File name -> [MPIJob], per team whose quota lets it run a GPU job. No Namespace: the
    team's is the program's."""
    if not settings.mpi.operator:
        return {}
    files = {}
    for team in settings.access.teams:
        workers = team_workers(settings, team)
        if workers:
            files[TEAM_FILE.format(team=team.name)] = [team_mpijob(settings, team, workers)]
    return files
