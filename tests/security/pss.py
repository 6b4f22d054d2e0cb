"""The Pod Security Standards' checks (https://kubernetes.io/docs/concepts/security/pod-security-standards/)
as k8s.io/pod-security-admission implements them (github.com/kubernetes/pod-security-admission,
commit 8f84a87c, policy/check_*.go; each check below names its file), for the pods, pod
templates and levels the tests judge. Windows pods, ephemeral containers and the
pre-1.19 seccomp annotations are left out: nothing the program runs has them."""

from collections.abc import Iterator
from typing import Optional

LEVELS = ("privileged", "baseline", "restricted")

# check_capabilities_baseline.go: the container runtime's default set.
BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL",
                         "MKNOD", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP",
                         "SETUID", "SYS_CHROOT"}
# check_restrictedVolumes.go: the only inline volume sources restricted admits.
RESTRICTED_VOLUMES = {"configMap", "downwardAPI", "emptyDir", "projected", "secret", "csi",
                      "persistentVolumeClaim", "ephemeral", "image"}
# check_sysctls.go: the safe set.
SAFE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range",
                "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range",
                "net.ipv4.ip_unprivileged_port_start", "net.ipv4.ip_local_reserved_ports",
                "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
                "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes",
                "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem",
                "net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_notsent_lowat"}
# check_seLinuxOptions.go: the types baseline admits ("" is unset).
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
SECCOMP_ALLOWED = {"RuntimeDefault", "Localhost"}


def _containers(spec: dict) -> list[dict]:
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]


def _sc(obj: dict) -> dict:
    return obj.get("securityContext") or {}


def baseline_violations(spec: dict) -> list[str]:
    problems = []
    # check_hostNamespaces.go
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            problems.append(f"{field}=true")
    containers = _containers(spec)
    for c in containers:
        sc = _sc(c)
        # check_privileged.go
        if sc.get("privileged"):
            problems.append(f"privileged container {c['name']}")
        # check_capabilities_baseline.go
        added = set((sc.get("capabilities") or {}).get("add") or [])
        if added - BASELINE_CAPABILITIES:
            problems.append(f"capabilities {sorted(added - BASELINE_CAPABILITIES)} "
                            f"in {c['name']}")
        # check_hostPorts.go
        for port in c.get("ports") or []:
            if port.get("hostPort"):
                problems.append(f"hostPort {port['hostPort']} in {c['name']}")
        # check_procMount_baseline.go
        if sc.get("procMount") not in (None, "Default"):
            problems.append(f"procMount in {c['name']}")
        # check_hostProbesAndhostLifecycle.go
        handlers = [c.get(p) or {} for p in ("livenessProbe", "readinessProbe", "startupProbe")]
        handlers += [(c.get("lifecycle") or {}).get(h) or {} for h in ("postStart", "preStop")]
        for handler in handlers:
            for kind in ("httpGet", "tcpSocket"):
                if (handler.get(kind) or {}).get("host"):
                    problems.append(f"probe or lifecycle host in {c['name']}")
    # check_hostPathVolumes.go
    for volume in spec.get("volumes") or []:
        if "hostPath" in volume:
            problems.append(f"hostPath volume {volume['name']}")
    # check_seccompProfile_baseline.go, check_seLinuxOptions.go, check_appArmorProfile.go
    for holder in [spec, *containers]:
        sc = _sc(holder)
        kind = (sc.get("seccompProfile") or {}).get("type")
        if kind is not None and kind not in SECCOMP_ALLOWED:
            problems.append(f"seccompProfile {kind}")
        selinux = sc.get("seLinuxOptions") or {}
        if selinux.get("type", "") not in SELINUX_TYPES or selinux.get("user") or \
                selinux.get("role"):
            problems.append("seLinuxOptions")
        apparmor = (sc.get("appArmorProfile") or {}).get("type")
        if apparmor is not None and apparmor not in ("RuntimeDefault", "Localhost"):
            problems.append(f"appArmorProfile {apparmor}")
    # check_sysctls.go
    for sysctl in _sc(spec).get("sysctls") or []:
        if sysctl["name"] not in SAFE_SYSCTLS:
            problems.append(f"sysctl {sysctl['name']}")
    return problems


def restricted_violations(spec: dict) -> list[str]:
    problems = baseline_violations(spec)
    # check_restrictedVolumes.go
    for volume in spec.get("volumes") or []:
        sources = set(volume) - {"name"}
        if sources - RESTRICTED_VOLUMES:
            problems.append(f"volume {volume['name']} of type {sorted(sources)[0]}")
    pod_sc = _sc(spec)
    user_namespace = spec.get("hostUsers") is False
    pod_seccomp = (pod_sc.get("seccompProfile") or {}).get("type")
    for c in _containers(spec):
        sc = _sc(c)
        # check_allowPrivilegeEscalation.go: must be false, explicitly.
        if sc.get("allowPrivilegeEscalation") is not False:
            problems.append(f"allowPrivilegeEscalation != false in {c['name']}")
        # check_capabilities_restricted.go
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            problems.append(f"capabilities not dropping ALL in {c['name']}")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            problems.append(f"capabilities added beyond NET_BIND_SERVICE in {c['name']}")
        if not user_namespace:
            # check_runAsNonRoot.go: container true, or unset under a pod-level true.
            non_root = sc.get("runAsNonRoot")
            if non_root is False or (non_root is None and pod_sc.get("runAsNonRoot") is not True):
                problems.append(f"runAsNonRoot != true in {c['name']}")
            # check_runAsUser.go
            if sc.get("runAsUser") == 0:
                problems.append(f"runAsUser=0 in {c['name']}")
        # check_seccompProfile_restricted.go: set on the container or the pod.
        kind = (sc.get("seccompProfile") or {}).get("type") or pod_seccomp
        if kind not in SECCOMP_ALLOWED:
            problems.append(f"seccompProfile not set in {c['name']}")
    if not user_namespace and pod_sc.get("runAsUser") == 0:
        problems.append("runAsUser=0")
    return problems


def violations(spec: dict, level: str) -> list[str]:
    """What refuses a pod with this spec at `level` (empty: admitted)."""
    if level == "privileged":
        return []
    if level == "baseline":
        return baseline_violations(spec)
    if level == "restricted":
        return restricted_violations(spec)
    raise ValueError(f"unknown level {level!r}")


def lowest_level(spec: dict) -> str:
    """The strictest level that admits the pod."""
    for level in reversed(LEVELS):
        if not violations(spec, level):
            return level
    return "privileged"


def pod_specs(obj: dict) -> Iterator[tuple[str, dict]]:
    """The pod specs an object runs: a Pod's, a workload's template, an MPIJob's replicas."""
    kind, spec = obj.get("kind"), obj.get("spec") or {}
    name = (obj.get("metadata") or {}).get("name", "")
    if kind == "Pod":
        yield name, spec
    elif kind in ("Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job"):
        if "spec" in (spec.get("template") or {}):
            yield name, spec["template"]["spec"]
    elif kind == "CronJob":
        yield name, spec["jobTemplate"]["spec"]["template"]["spec"]
    elif kind == "MPIJob":
        for role, replica in (spec.get("mpiReplicaSpecs") or {}).items():
            yield f"{name}/{role}", replica["template"]["spec"]


def effective_level(namespace: Optional[dict], name: str, default: str,
                    exempt: frozenset = frozenset()) -> str:
    """The enforce level of a namespace (its label, else the cluster default); an exempt
    namespace admits anything."""
    if name in exempt:
        return "privileged"
    labels = ((namespace or {}).get("metadata") or {}).get("labels") or {}
    return labels.get("pod-security.kubernetes.io/enforce", default)
