"""The control plane drill: controllers of the recorded cluster made k0s controllers or RKE2
servers as their API shows them (k0s: EtcdMember objects and controller leases; RKE2: Nodes
labelled etcd with k3s's EtcdIsVoter condition and the etcd/kube-apiserver mirror pods),
some of them down as a controller that stopped shows: a warning naming it while etcd keeps a
quorum of floor(n/2)+1, a problem once it does not."""

import copy
import datetime
import json

import pytest

from doctor.checks.control_plane import quorum
from doctor.checks.every import run
from doctor.findings import OK, PROBLEM, UNCHECKED, WARNING, exit_code
from tests.doctor.cluster import stamp
from tests.doctor.test_command import run_doctor, write_outputs

CHECKS = ("etcd-quorum", "controller-api")
NAMES = ("ctl-a", "ctl-b", "ctl-c", "ctl-d", "ctl-e")


def _controllers(cluster, count: int) -> list[str]:
    """`count` controllers in the stack's nodes output, in place of the lab's one."""
    names = list(NAMES[:count])
    cluster.nodes = [n for n in cluster.nodes if n["role"] != "controller"] + [
        {"name": name, "address": f"192.168.2.{11 + i}", "role": "controller", "gpus": 0,
         "gpuModel": None} for i, name in enumerate(names)]
    return names


def _renamed(template: dict, name: str) -> dict:
    obj = copy.deepcopy(template)
    obj["metadata"]["name"] = name
    return obj


def k0s(cluster, count: int, down=(), api_down=()) -> list[str]:
    """k0s controllers; those in `down` stopped (their controller lease and their API
    server's identity lease no longer renewed), those in `api_down` only their API server."""
    names = _controllers(cluster, count)
    now = cluster.now
    member, *_ = cluster.items("etcdmembers")
    controller_lease = next(lease for lease in cluster.items("node-leases")
                            if lease["metadata"]["name"] == "k0s-ctrl-controller")
    api_lease, *_ = cluster.items("apiserver-leases")
    members, leases, api_leases = [], [], []
    for i, name in enumerate(names):
        members.append(_renamed(member, name))
        members[-1]["metadata"]["labels"]["k0s.k0sproject.io/controller-lease"] = \
            f"k0s-ctrl-{name}"
        members[-1]["status"].update(memberID=f"{0x8e9e05c52164694d + i:x}",
                                     peerAddress=f"192.168.2.{11 + i}")
        lease = _renamed(controller_lease, f"k0s-ctrl-{name}")
        api = _renamed(api_lease, f"apiserver-{name}")
        api["metadata"]["labels"]["kubernetes.io/hostname"] = name
        if name in down:
            # k0s's lease lasts 60 s (pkg/leaderelection/client.go:97): long lapsed.
            lease["spec"]["renewTime"] = stamp(now - datetime.timedelta(minutes=4), micro=True)
        if name in down or name in api_down:
            api["spec"]["renewTime"] = stamp(now - datetime.timedelta(minutes=4), micro=True)
        leases.append(lease)
        api_leases.append(api)
    kubelets = [lease for lease in cluster.items("node-leases")
                if not lease["metadata"]["name"].startswith("k0s-ctrl-")]
    cluster.lists["etcdmembers"]["items"] = members
    cluster.lists["node-leases"]["items"] = leases + kubelets
    cluster.lists["apiserver-leases"]["items"] = api_leases
    return names


def _condition(obj: dict, kind: str) -> dict:
    return next(c for c in obj["status"]["conditions"] if c["type"] == kind)


def _mirror_pod(template: dict, component: str, node: str, ready: bool) -> dict:
    """A static pod's mirror as the kubelet posts it: `<name>-<node>`, owned by the Node."""
    pod = _renamed(template, f"{component}-{node}")
    metadata = pod["metadata"]
    metadata.pop("generateName", None)
    metadata["labels"] = {"component": component, "tier": "control-plane"}
    metadata["annotations"] = {"kubernetes.io/config.source": "file",
                               "kubernetes.io/config.mirror": "0f3e5d7c9b1a"}
    metadata["ownerReferences"] = [{"apiVersion": "v1", "controller": True, "kind": "Node",
                                    "name": node, "uid": "9d8c7b6a-5f4e-4d3c-2b1a-0f9e8d7c6b5a"}]
    pod["spec"]["nodeName"] = node
    pod["spec"]["containers"][0]["name"] = component
    if not ready:
        # The node lifecycle controller marks an unreachable node's pods not Ready.
        _condition(pod, "Ready").update(status="False", reason="NodeNotReady")
    return pod


def rke2(cluster, count: int, down=(), learner=()) -> list[str]:
    """RKE2 servers (Nodes of their own); those in `down` stopped as the API then shows it."""
    names = _controllers(cluster, count)
    cluster.absent = {"etcdmembers"}
    node_template = copy.deepcopy(cluster.find("nodes", "moscow"))
    pod_template = next(p for p in cluster.items("pods")
                        if p["metadata"]["name"].startswith("nvidia-device-plugin"))
    since = stamp(cluster.now - datetime.timedelta(days=2))
    for i, name in enumerate(names):
        node = _renamed(node_template, name)
        node["status"]["addresses"] = [{"type": "InternalIP", "address": f"192.168.2.{11 + i}"},
                                       {"type": "Hostname", "address": name}]
        node["metadata"]["labels"] = {
            "kubernetes.io/hostname": name, "node-role.kubernetes.io/control-plane": "true",
            "node-role.kubernetes.io/etcd": "true", "node-role.kubernetes.io/master": "true"}
        voter = {"type": "EtcdIsVoter", "status": "True", "reason": "MemberNotLearner",
                 "message": "Node is a voting member of the etcd cluster",
                 "lastHeartbeatTime": since, "lastTransitionTime": since}
        if name in learner:
            voter.update(status="False", reason="MemberIsLearner",
                         message="Node has not been promoted to voting member of the etcd "
                                 "cluster")
        if name in down:
            voter.update(status="False", reason="Unhealthy", message="failed to check etcd "
                         "member status: context deadline exceeded")
            _condition(node, "Ready").update(status="Unknown", reason="NodeStatusUnknown",
                                             message="Kubelet stopped posting node status.")
        node["status"]["conditions"].append(voter)
        cluster.items("nodes").append(node)
        cluster.items("pods").extend(
            _mirror_pod(pod_template, component, name, name not in down)
            for component in ("etcd", "kube-apiserver"))
    return names


DISTRIBUTIONS = {"k0s": k0s, "rke2": rke2}


def findings(cluster, check=None):
    return [f for f in run(cluster.context()) if f.check == check or
            (check is None and f.check in CHECKS)]


def test_quorum_is_a_majority():
    assert [quorum(n) for n in range(1, 8)] == [1, 2, 2, 3, 3, 4, 4]


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_three_healthy_controllers(cluster, distribution):
    DISTRIBUTIONS[distribution](cluster, 3)
    [etcd] = findings(cluster, "etcd-quorum")
    assert etcd.verdict == OK, etcd
    assert etcd.message.startswith("etcd members ctl-a, ctl-b, ctl-c up, quorum 2 of 3: "
                                   "tolerates 1 failure. etcd's leader is not visible")
    api = findings(cluster, "controller-api")
    assert [(f.verdict, f.subject) for f in api] == [
        (OK, "controller ctl-a"), (OK, "controller ctl-b"), (OK, "controller ctl-c")]


# (members, down, verdict, what the message says of the count and the tolerance)
DRILLS = [
    (3, ("ctl-b",), WARNING, "2 of 3 etcd members up, quorum is 2: the cluster tolerates no "
                             "further failure"),
    (3, ("ctl-b", "ctl-c"), PROBLEM, "quorum lost: 1 of 3 etcd members up, quorum is 2"),
    (5, ("ctl-e",), WARNING, "4 of 5 etcd members up, quorum is 3: the cluster tolerates 1 "
                             "more failure."),
    (5, ("ctl-a", "ctl-d"), WARNING, "3 of 5 etcd members up, quorum is 3: the cluster "
                                     "tolerates no further failure"),
    (5, ("ctl-a", "ctl-b", "ctl-d"), PROBLEM, "quorum lost: 2 of 5 etcd members up, quorum "
                                              "is 3"),
]


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
@pytest.mark.parametrize("count,down,verdict,says", DRILLS,
                         ids=[f"{c}-members-{len(d)}-down" for c, d, _, _ in DRILLS])
def test_controllers_down(cluster, distribution, count, down, verdict, says):
    DISTRIBUTIONS[distribution](cluster, count, down=down)
    [etcd] = findings(cluster, "etcd-quorum")
    assert (etcd.verdict, etcd.subject) == (verdict, "control plane"), etcd
    assert says in etcd.message, etcd.message
    for name in down:
        assert f"{name} " in etcd.message
    up = [name for name in NAMES[:count] if name not in down]
    assert not any(f"{name} " in etcd.message for name in up), etcd.message
    # Each down controller's API server is named too; the others are fine.
    api = {f.subject: f.verdict for f in findings(cluster, "controller-api")}
    assert api == {f"controller {name}": WARNING if name in down else OK
                   for name in NAMES[:count]}
    assert exit_code(findings(cluster)) == (1 if verdict == PROBLEM else 0)


def test_what_k0s_shows_of_a_stopped_controller(cluster):
    k0s(cluster, 3, down=("ctl-b",))
    [etcd] = findings(cluster, "etcd-quorum")
    assert etcd.message.startswith("ctl-b down (its controller lease kube-node-lease/"
                                   "k0s-ctrl-ctl-b was last renewed 4 minutes ago); ")
    [api] = [f for f in findings(cluster, "controller-api") if f.verdict != OK]
    assert api.message.startswith("its API server's identity lease (kube-system, hostname "
                                  "ctl-b) was last renewed 4 minutes ago")


def test_what_rke2_shows_of_a_stopped_server(cluster):
    rke2(cluster, 3, down=("ctl-c",))
    [etcd] = findings(cluster, "etcd-quorum")
    assert etcd.message.startswith("ctl-c down (its node's Ready is Unknown); ")
    [api] = [f for f in findings(cluster, "controller-api") if f.verdict != OK]
    assert api.message.startswith("its pod kube-system/kube-apiserver-ctl-c is not Ready")


def test_an_api_server_down_alone_leaves_the_quorum_whole(cluster):
    k0s(cluster, 3, api_down=("ctl-a",))
    [etcd] = findings(cluster, "etcd-quorum")
    assert etcd.verdict == OK
    api = {f.subject: f for f in findings(cluster, "controller-api") if f.verdict != OK}
    assert list(api) == ["controller ctl-a"] and api["controller ctl-a"].verdict == WARNING


def test_a_learner_is_no_voter(cluster):
    rke2(cluster, 3, learner=("ctl-c",))
    [etcd] = findings(cluster, "etcd-quorum")
    # Two voters: both are needed, and the joining one is named.
    assert etcd.verdict == WARNING
    assert "2 of 2 etcd members up, quorum is 2: the cluster tolerates no further failure; " \
           "not voting: ctl-c (Node has not been promoted" in etcd.message


def test_a_member_that_left_is_not_counted(cluster):
    k0s(cluster, 3)
    member = cluster.items("etcdmembers")[2]
    member["status"]["conditions"][0].update(status="False", message="No such member ID")
    [etcd] = findings(cluster, "etcd-quorum")
    assert etcd.verdict == WARNING
    assert "2 of 2 etcd members up" in etcd.message
    assert "not voting: ctl-c (not joined: No such member ID)" in etcd.message


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_one_controller_is_no_warning(cluster, distribution):
    DISTRIBUTIONS[distribution](cluster, 1)
    assert [(f.check, f.verdict) for f in findings(cluster)] == [("etcd-quorum", OK)]
    [etcd] = findings(cluster)
    assert etcd.message.startswith("one controller (ctl-a), one etcd member: it tolerates no "
                                   "failure")


def test_members_that_cannot_be_read(cluster):
    cluster.errors["etcdmembers"] = ("GET /apis/etcd.k0sproject.io/v1beta1/etcdmembers "
                                     "answered HTTP 403")
    [etcd] = findings(cluster)
    assert (etcd.verdict, etcd.check) == (UNCHECKED, "etcd-quorum")
    assert "cannot list etcdmembers" in etcd.message


def test_three_controllers_and_no_member_visible(cluster):
    _controllers(cluster, 3)
    cluster.absent = {"etcdmembers"}
    [etcd] = findings(cluster)
    assert etcd.verdict == UNCHECKED
    assert etcd.message.startswith("3 controllers configured but no etcd member visible")


def test_rke2_drill_through_the_api(served, cluster, authority, tmp_path):
    """The real collector: RKE2 serves no EtcdMember type (HTTP 404), the servers' Nodes and
    mirror pods tell; one server down is a warning, two a problem. (The down server's Node
    is also node-ready's problem: an RKE2 server is a node.)"""
    rke2(cluster, 3, down=("ctl-b",))
    served.absent.add("etcdmembers")
    outputs, _ = write_outputs(tmp_path, cluster, authority, served.url)
    report = run_doctor("--outputs", str(outputs), "--json")
    document = json.loads(report.stdout)
    [etcd] = [f for f in document["findings"] if f["check"] == "etcd-quorum"]
    assert etcd["verdict"] == WARNING and "ctl-b down" in etcd["message"]
    assert [(f["check"], f["subject"]) for f in document["findings"]
            if f["verdict"] in (PROBLEM, UNCHECKED)] == [("node-ready", "node ctl-b")]
    assert ("GET", "/apis/etcd.k0sproject.io/v1beta1/etcdmembers?limit=500") in served.requests

    rke2_down = next(n for n in cluster.items("nodes") if n["metadata"]["name"] == "ctl-c")
    _condition(rke2_down, "Ready").update(status="Unknown", reason="NodeStatusUnknown")
    table = run_doctor("--outputs", str(outputs))
    assert table.returncode == 1, table.stdout + table.stderr
    assert "PROBLEM          etcd-quorum" in table.stdout
    assert "quorum lost: 1 of 3 etcd members up, quorum is 2" in table.stdout
