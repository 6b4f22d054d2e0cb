"""The control plane: etcd's members up, its quorum, and each controller's API server.

What the API shows of them, per distribution:
- k0s: an EtcdMember object per member (cluster-scoped; `Joined` is its only condition and
  says membership, not health: k0sproject/k0s v1.36.3+k0s.2 pkg/apis/etcd/v1beta1/
  types.go:55-74), and a lease `kube-node-lease/k0s-ctrl-<node>` each running controller
  renews (pkg/component/controller/controllersleasecounter.go:53-61), named on the member by
  the label `k0s.k0sproject.io/controller-lease` (etcd_member_reconciler.go:41, 451-463). k0s
  runs etcd and the API server inside the controller process, so a lease that lapsed is a
  controller down, its member with it.
- RKE2: the servers' Nodes carry `node-role.kubernetes.io/etcd=true` and k3s's condition
  `EtcdIsVoter` (True; False with reason MemberIsLearner, Unhealthy or NotAMember), which
  the etcd leader sets from each member's status every 15 s (k3s-io/k3s pkg/etcd/
  metadata_controller.go handleSelf; etcd.go etcdStatusType, manageLearners,
  setEtcdStatusCondition; read at k3s main, not at RKE2's pinned k3s 4ca29faac89e, rke2
  go.mod:77); etcd and kube-apiserver are static pods (rancher/rke2 v1.36.3+rke2r1
  pkg/podtemplate/podtemplate.go:63-69: name = the component, kube-system), whose mirror pods
  the kubelet names `<name>-<node>` (kubernetes/kubernetes pkg/kubelet/config/common.go,
  generatePodName).
- Either: each kube-apiserver renews an identity lease in kube-system every 10 s, labelled
  `apiserver.kubernetes.io/identity=kube-apiserver` and `kubernetes.io/hostname`
  (kubernetes/kubernetes pkg/controlplane/apiserver/server.go, IdentityLeaseRenewIntervalPeriod,
  labelAPIServerHeartbeatFunc).

etcd's leader is not readable through the Kubernetes API in either distribution (k3s reads
it from etcd's own Status call, etcd.go manageLearners; k0s records none), so the findings
say so rather than guess."""

import datetime
from dataclasses import dataclass
from typing import Optional

from doctor.checks import Context, name_of, parse_time
from doctor.checks.nodes import ready_condition
from doctor.findings import Finding, ok, problem, unchecked, warning

CHECK = "etcd-quorum"
API_CHECK = "controller-api"
SUBJECT = "control plane"
K0S_LEASE_LABEL = "k0s.k0sproject.io/controller-lease"
K0S_LEASE_PREFIX = "k0s-ctrl-"
ETCD_ROLE_LABEL = "node-role.kubernetes.io/etcd"
VOTER_CONDITION = "EtcdIsVoter"
# Reasons of EtcdIsVoter=False that say the node is no voting member (yet), not that it is down.
NOT_VOTING = ("MemberIsLearner", "NotAMember")
HOSTNAME_LABEL = "kubernetes.io/hostname"
# The identity lease is renewed every 10 s but lasts an hour; older than this, its API server
# stopped (a dozen renewals missed, room for clock skew).
API_LEASE_FRESH = datetime.timedelta(minutes=2)
# The controller's systemd unit (components/scripts/k0s/lib.sh k0s_service_name;
# components/distributions/rke2.py controller_service).
SERVICE = {"k0s": "k0scontroller", "rke2": "rke2-server"}
LEADER = ("etcd's leader is not visible through the Kubernetes API (`etcdctl endpoint status "
          "--cluster` on a controller names it)")


def quorum(voters: int) -> int:
    """A majority of the voting members: floor(n/2)+1 (etcd.io/docs/v3.6/faq, "What is
    failure tolerance?"): 1 of 1, 2 of 3, 3 of 5."""
    return voters // 2 + 1


@dataclass(frozen=True)
class Member:
    name: str
    # Counted in the quorum: joined and no learner.
    voting: bool
    up: bool
    # What was seen, for the message: "its controller lease lapsed at ...".
    seen: str


def _condition(obj: dict, kind: str) -> dict:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == kind), {})


def _age(now: datetime.datetime, moment: Optional[datetime.datetime]) -> str:
    if moment is None:
        return "never"
    minutes = int((now - moment).total_seconds() // 60)
    return f"{minutes} minutes ago" if minutes >= 1 else "under a minute ago"


def k0s_lease_valid(lease: Optional[dict], now: datetime.datetime) -> bool:
    """Held and unexpired, as k0s counts its controllers (pkg/kubernetes/lease.go:18-40)."""
    spec = (lease or {}).get("spec") or {}
    renewed = parse_time(spec.get("renewTime"))
    if not spec.get("holderIdentity") or renewed is None:
        return False
    return renewed + datetime.timedelta(seconds=int(spec.get("leaseDurationSeconds") or 0)) > now


def k0s_members(etcd_members: list[dict], node_leases: list[dict],
                now: datetime.datetime) -> list[Member]:
    leases = {name_of(lease): lease for lease in node_leases}
    members = []
    for member in etcd_members:
        name = name_of(member)
        joined = _condition(member, "Joined")
        if joined.get("status") != "True":
            members.append(Member(name, False, False, "not joined: "
                                  + (joined.get("message") or "no Joined condition yet")))
            continue
        lease_name = ((member["metadata"].get("labels") or {}).get(K0S_LEASE_LABEL)
                      or K0S_LEASE_PREFIX + name)
        lease = leases.get(lease_name)
        if k0s_lease_valid(lease, now):
            members.append(Member(name, True, True, "joined, its controller lease held"))
            continue
        renewed = parse_time(((lease or {}).get("spec") or {}).get("renewTime"))
        seen = (f"its controller lease kube-node-lease/{lease_name} was last renewed "
                f"{_age(now, renewed)}" if lease else
                f"no controller lease kube-node-lease/{lease_name}")
        members.append(Member(name, True, False, seen))
    return members


def _pods(pods: list[dict]) -> dict[str, dict]:
    return {name_of(pod): pod for pod in pods
            if pod["metadata"].get("namespace") == "kube-system"}


def _pod_ready(pod: Optional[dict]) -> bool:
    return _condition(pod or {}, "Ready").get("status") == "True"


def rke2_members(nodes: list[dict], pods: list[dict]) -> list[Member]:
    system = _pods(pods)
    members = []
    for node in nodes:
        if (node["metadata"].get("labels") or {}).get(ETCD_ROLE_LABEL) != "true":
            continue
        name = name_of(node)
        voter = _condition(node, VOTER_CONDITION)
        if voter.get("status") == "False" and voter.get("reason") in NOT_VOTING:
            members.append(Member(name, False, False, voter.get("message") or voter["reason"]))
            continue
        ready = ready_condition(node).get("status", "Unknown")
        pod = f"etcd-{name}"
        if ready != "True":
            seen = f"its node's Ready is {ready}"
        elif pod not in system:
            seen = f"no mirror pod kube-system/{pod}"
        elif not _pod_ready(system[pod]):
            seen = f"its pod kube-system/{pod} is not Ready"
        elif voter.get("status") == "False":
            seen = f"{VOTER_CONDITION} is False ({voter.get('message') or voter.get('reason')})"
        else:
            members.append(Member(name, True, True, "a voting member, its pod Ready"))
            continue
        members.append(Member(name, True, False, seen))
    return members


def _members(context: Context) -> tuple[Optional[str], list[Member], list[Finding]]:
    """The distribution as the API shows it, its members, and what could not be read."""
    snapshot = context.snapshot
    if "etcdmembers" not in snapshot.absent:
        etcd_members, missing = context.listed(CHECK, "etcdmembers")
        leases, more = context.listed(CHECK, "node-leases")
        if missing or more:
            return None, [], missing + more
        if etcd_members:
            return "k0s", k0s_members(etcd_members, leases, context.now), []
    nodes, missing = context.listed(CHECK, "nodes")
    pods, more = context.listed(CHECK, "pods")
    if missing or more:
        return None, [], missing + more
    members = rke2_members(nodes, pods)
    return ("rke2" if members else None), members, []


def _failures(count: int, more: str = "") -> str:
    """"1 failure", "2 more failures", "no further failure"."""
    if count == 0:
        return "no further failure" if more else "no failure"
    return f"{count} {more}failure{'' if count == 1 else 's'}"


def quorum_findings(members: list[Member], controllers: list[str],
                    service: str) -> list[Finding]:
    """One finding on the whole: ok, a warning naming what is down while a quorum is up, or
    a problem once it is not."""
    voters = [m for m in members if m.voting]
    down = [m for m in voters if not m.up]
    others = [m for m in members if not m.voting]
    # With one controller configured, its name is the stack's and may not be the member's.
    unjoined = [name for name in controllers if name not in {m.name for m in members}
                ] if len(controllers) > 1 else []
    aside = "".join([
        f"; not voting: {', '.join(f'{m.name} ({m.seen})' for m in others)}" if others else "",
        f"; configured controllers without an etcd member: {', '.join(unjoined)}"
        if unjoined else ""])
    if len(voters) <= 1 and len(controllers) <= 1:
        only = voters[0].name if voters else (controllers or ["the controller"])[0]
        return [ok(CHECK, SUBJECT, f"one controller ({only}), one etcd member: it tolerates no "
                   f"failure (3 controllers tolerate one){aside}")]
    need = quorum(len(voters))
    up = len(voters) - len(down)
    counts = f"{up} of {len(voters)} etcd members up, quorum is {need}"
    if up < need:
        return [problem(
            CHECK, SUBJECT, f"quorum lost: {counts}; down: "
            + "; ".join(f"{m.name} ({m.seen})" for m in down) + aside,
            "etcd accepts no write, so the API cannot change anything: start the down "
            f"controllers (their {service} service); if they are lost, "
            "restore the control plane from a backup (docs/day-2.md, Restoring the control "
            "plane).")]
    spare = up - need
    if down or others or unjoined:
        detail = "; ".join(f"{m.name} down ({m.seen})" for m in down)
        return [warning(
            CHECK, SUBJECT, (f"{detail}; " if detail else "") + f"{counts}: the cluster "
            f"tolerates {_failures(spare, 'more ')}{aside}. {LEADER}",
            f"bring the named controllers back (their {service} service's log says why "
            "they stopped); a controller that is gone for good has its etcd "
            "member removed before it is replaced (docs/day-2.md).")]
    return [ok(CHECK, SUBJECT, f"etcd members {', '.join(m.name for m in voters)} up, quorum "
               f"{need} of {len(voters)}: tolerates {_failures(spare)}. {LEADER}")]


def _apiserver_leases(context: Context) -> dict[str, datetime.datetime]:
    """hostname -> the latest renewal of its API server's identity lease."""
    renewed: dict[str, datetime.datetime] = {}
    for lease in context.snapshot.items("apiserver-leases") or []:
        host = (lease["metadata"].get("labels") or {}).get(HOSTNAME_LABEL)
        moment = parse_time((lease.get("spec") or {}).get("renewTime"))
        if host and moment and (host not in renewed or moment > renewed[host]):
            renewed[host] = moment
    return renewed


def _api_down(context: Context, distribution: str, name: str) -> Optional[str]:
    """Why `name`'s API server looks down, or None when it is up."""
    if distribution == "rke2":
        pod = f"kube-apiserver-{name}"
        if _pod_ready(_pods(context.snapshot.items("pods") or []).get(pod)):
            return None
        return f"its pod kube-system/{pod} is not Ready"
    renewed = _apiserver_leases(context).get(name)
    if renewed is not None and context.now - renewed <= API_LEASE_FRESH:
        return None
    return (f"its API server's identity lease (kube-system, hostname {name}) was last renewed "
            f"{_age(context.now, renewed)}")


def api_findings(context: Context, distribution: str, names: list[str]) -> list[Finding]:
    """Each controller's API server: RKE2's mirror pod kube-apiserver-<node> Ready, or for
    k0s (no pods of its control plane) its identity lease renewed of late."""
    findings = [] if distribution == "rke2" else context.missing(API_CHECK, "apiserver-leases")
    if findings:
        return findings
    for name in names:
        subject = f"controller {name}"
        down = _api_down(context, distribution, name)
        if down is None:
            findings.append(ok(API_CHECK, subject, "its API server is up"))
            continue
        findings.append(warning(
            API_CHECK, subject, f"{down}; the other controllers serve the API",
            f"look at the API server's log on {name} (journalctl of its "
            f"{SERVICE[distribution]} service); until it is back, the endpoint must not send "
            "clients to it."))
    return findings


def control_plane(context: Context) -> list[Finding]:
    """etcd's quorum and each controller's API server, as far as the API shows them."""
    distribution, members, findings = _members(context)
    if findings:
        return findings
    controllers = [node.name for node in context.stack.controllers]
    if distribution is None:
        if len(controllers) <= 1:
            return [ok(CHECK, SUBJECT, "one controller; its etcd is not visible through the "
                       "API (no EtcdMember objects, no Node labelled "
                       f"{ETCD_ROLE_LABEL}=true)")]
        return [unchecked(CHECK, SUBJECT, f"{len(controllers)} controllers configured but no "
                          "etcd member visible through the API (no EtcdMember objects, no "
                          f"Node labelled {ETCD_ROLE_LABEL}=true)")]
    findings = quorum_findings(members, controllers, SERVICE[distribution])
    names = sorted({m.name for m in members if m.voting} | set(controllers))
    if len(names) > 1:
        findings.extend(api_findings(context, distribution, names))
    return findings
