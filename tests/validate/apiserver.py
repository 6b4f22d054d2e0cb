"""A Kubernetes API on loopback for `python -m validate`: HTTPS with a certificate of the
cluster CA and a client certificate required (as tests/doctor/apiserver.py), serving recorded
Nodes and keeping the objects the command creates. A created pod ends at once as its
scenario says (phase, exit code, log); an MPIJob succeeds and gets a launcher pod with the
scenario's log. Deletes by label selector and of namespaces remove objects, so a test can see
that nothing was left behind. Every request is recorded."""

import copy
import json
import threading
from typing import Callable
from urllib.parse import parse_qs, unquote, urlsplit

from tests.doctor.apiserver import ApiHandler, LoopbackHttps
from tests.pki import Authority

# A scenario: pod -> {"phase", "exitCode", "log", "podIP"}.
Scenario = Callable[[dict], dict]
PLURALS = {"pods": "Pod", "persistentvolumeclaims": "PersistentVolumeClaim",
           "mpijobs": "MPIJob", "namespaces": "Namespace"}


def _matches(obj: dict, selector: str) -> bool:
    labels = obj["metadata"].get("labels") or {}
    for term in filter(None, selector.split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    return True


class ApiServer(LoopbackHttps):
    def __init__(self, authority: Authority, nodes: list[dict], scenario: Scenario):
        self.nodes, self.scenario = nodes, scenario
        self.objects: dict[tuple, dict] = {}  # (plural, namespace, name) -> object
        self.logs: dict[tuple, str] = {}
        self.requests: list[tuple[str, str]] = []
        self.created: list[dict] = []
        self.lock = threading.Lock()
        super().__init__(authority, self._handler())

    def remaining(self) -> list[tuple]:
        return sorted(self.objects)

    def _run_pod(self, pod: dict) -> None:
        outcome = self.scenario(pod)
        status: dict = {"phase": outcome["phase"]}
        if outcome.get("podIP"):
            status["podIP"] = outcome["podIP"]
        if outcome["phase"] in ("Succeeded", "Failed"):
            code = outcome.get("exitCode", 0 if outcome["phase"] == "Succeeded" else 1)
            status["containerStatuses"] = [{
                "name": pod["spec"]["containers"][0]["name"], "ready": False, "restartCount": 0,
                "state": {"terminated": {"exitCode": code,
                                         "reason": "Completed" if code == 0 else "Error"}}}]
        elif outcome["phase"] == "Pending":
            status["conditions"] = [{"type": "PodScheduled", "status": "False",
                                     "reason": "Unschedulable",
                                     "message": outcome.get("message", "0/3 nodes are available")}]
        pod["status"] = status
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        self.logs[key] = outcome.get("log", "")

    def _create(self, plural: str, namespace, obj: dict) -> dict:
        obj = copy.deepcopy(obj)
        obj["metadata"].setdefault("uid", f"uid-{len(self.created)}")
        if namespace:
            obj["metadata"]["namespace"] = namespace
        self.created.append(copy.deepcopy(obj))
        if plural == "pods":
            self._run_pod(obj)
        if plural == "mpijobs":
            outcome = self.scenario(obj)
            obj["status"] = {"conditions": [{"type": outcome["phase"], "status": "True"}]}
            launcher = {"apiVersion": "v1", "kind": "Pod", "metadata": {
                "name": f"{obj['metadata']['name']}-launcher-x7k2p", "namespace": namespace,
                "labels": {"training.kubeflow.org/job-name": obj["metadata"]["name"],
                           "training.kubeflow.org/job-role": "launcher",
                           **obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]
                           ["metadata"]["labels"]}},
                "spec": obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]}
            self.objects[("pods", namespace, launcher["metadata"]["name"])] = launcher
            self._run_pod_outcome(launcher, outcome)
        self.objects[(plural, namespace, obj["metadata"]["name"])] = obj
        return obj

    def _run_pod_outcome(self, pod: dict, outcome: dict) -> None:
        scenario, self.scenario = self.scenario, lambda _: outcome
        try:
            self._run_pod(pod)
        finally:
            self.scenario = scenario

    def _handler(self):
        server = self

        class Handler(ApiHandler):

            def _route(self):
                url = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                parts = [unquote(p) for p in url.path.strip("/").split("/")]
                # /api/v1/... or /apis/<group>/<version>/...
                rest = parts[2:] if parts[0] == "api" else parts[3:]
                namespace = None
                if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) > 2:
                    namespace, rest = rest[1], rest[2:]
                return rest, namespace, query

            def do_GET(self):
                server.requests.append(("GET", self.path))
                rest, namespace, query = self._route()
                with server.lock:
                    if rest == ["nodes"]:
                        return self._send(200, {"kind": "NodeList", "metadata": {},
                                                "items": server.nodes})
                    if len(rest) == 1 and rest[0] in PLURALS:
                        items = [o for (p, ns, _), o in server.objects.items()
                                 if p == rest[0] and (namespace is None or ns == namespace)
                                 and _matches(o, query.get("labelSelector", ""))]
                        return self._send(200, {"metadata": {}, "items": items})
                    if len(rest) == 3 and rest[0] == "pods" and rest[2] == "log":
                        if ("pods", namespace, rest[1]) in server.objects:
                            return self._send(200, server.logs.get((namespace, rest[1]), ""),
                                              "text/plain")
                    elif len(rest) == 2 and (rest[0], namespace, rest[1]) in server.objects:
                        return self._send(200, server.objects[(rest[0], namespace, rest[1])])
                self._status(404, "NotFound", f"{'/'.join(rest)} not found")

            def do_POST(self):
                server.requests.append(("POST", self.path))
                rest, namespace, _ = self._route()
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    if len(rest) == 1 and rest[0] == "namespaces" and namespace is None:
                        namespace_key = None
                    elif len(rest) == 1 and rest[0] in PLURALS:
                        if ("namespaces", None, namespace) not in server.objects:
                            return self._status(404, "NotFound",
                                                f"namespaces \"{namespace}\" not found")
                        namespace_key = namespace
                    else:
                        return self._status(404, "NotFound", "no such collection")
                    self._send(201, server._create(rest[0], namespace_key, body))

            def do_DELETE(self):
                server.requests.append(("DELETE", self.path))
                rest, namespace, query = self._route()
                with server.lock:
                    if len(rest) == 1:  # a collection, by label
                        for key in [k for k, o in server.objects.items()
                                    if k[0] == rest[0] and k[1] == namespace
                                    and _matches(o, query.get("labelSelector", ""))]:
                            del server.objects[key]
                        return self._send(200, {"kind": "Status", "status": "Success"})
                    if rest[0] == "namespaces":
                        for key in [k for k in server.objects
                                    if k[1] == rest[1] or k == ("namespaces", None, rest[1])]:
                            del server.objects[key]
                        return self._send(200, {"kind": "Status", "status": "Success"})
                self._status(405, "MethodNotAllowed", "not here")

        return Handler
