"""The few API calls the checks need, over the contract's API client (contract/kubeapi.py, one
place for the kubeconfig, TLS and errors): create, read, list by label, pod logs, delete by label. Waiting
is polling, so it works through any proxy and never holds a watch open."""

import time
from typing import Callable, Optional
from urllib.parse import quote

from contract.kubeapi import ApiError, Client

# Every object a run creates carries this label with the run's id; cleanup deletes by it.
RUN_LABEL = "gpu-cluster/validate-run"
POLL_SECONDS = 3.0

# kind -> (API group path, plural); every kind the checks create.
KINDS = {
    "Namespace": ("/api/v1", "namespaces"),
    "Pod": ("/api/v1", "pods"),
    "PersistentVolumeClaim": ("/api/v1", "persistentvolumeclaims"),
    "MPIJob": ("/apis/kubeflow.org/v2beta1", "mpijobs"),
}
# What cleanup deletes in the run's namespace before the namespace itself: pods first, so a
# claim is not held; MPIJobs (their launcher and workers go with them).
NAMESPACED_CLEANUP = ("MPIJob", "Pod", "PersistentVolumeClaim")


def path_of(kind: str, namespace: Optional[str] = None, name: Optional[str] = None) -> str:
    group, plural = KINDS[kind]
    base = f"{group}/namespaces/{quote(namespace)}/{plural}" if namespace else f"{group}/{plural}"
    return f"{base}/{quote(name)}" if name else base


class Kube:
    def __init__(self, client: Client, run_id: str, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic):
        self.client, self.run_id = client, run_id
        self.sleep, self.clock = sleep, clock

    @property
    def selector(self) -> str:
        return quote(f"{RUN_LABEL}={self.run_id}", safe="")

    def create(self, obj: dict) -> dict:
        namespace = obj["metadata"].get("namespace") if obj["kind"] != "Namespace" else None
        return self.client.request("POST", path_of(obj["kind"], namespace), body=obj,
                                   accept=(200, 201, 202))

    def read(self, kind: str, namespace: Optional[str], name: str) -> dict:
        return self.client.get(path_of(kind, namespace, name))

    def nodes(self) -> list[dict]:
        return self.client.list("/api/v1/nodes")

    def pods(self, namespace: str, selector: str) -> list[dict]:
        return self.client.list(f"{path_of('Pod', namespace)}?labelSelector="
                                f"{quote(selector, safe='')}")

    def log(self, namespace: str, pod: str, container: Optional[str] = None) -> str:
        query = f"?container={quote(container)}" if container else ""
        return self.client.get(f"{path_of('Pod', namespace, pod)}/log{query}", as_json=False)

    def wait_pod(self, namespace: str, name: str, deadline: float) -> dict:
        """The pod once Succeeded or Failed; TimeoutError at `deadline` (a monotonic time)."""
        while True:
            pod = self.read("Pod", namespace, name)
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                return pod
            if self.clock() >= deadline:
                raise TimeoutError(_pending_reason(pod))
            self.sleep(POLL_SECONDS)

    def wait_running(self, namespace: str, name: str, deadline: float) -> dict:
        """The pod once Running with an IP (a server the next pod connects to)."""
        while True:
            pod = self.read("Pod", namespace, name)
            status = pod.get("status") or {}
            if status.get("phase") == "Running" and status.get("podIP"):
                return pod
            if status.get("phase") in ("Succeeded", "Failed"):
                raise RuntimeError(f"pod {name} ended ({status.get('phase')}) before serving")
            if self.clock() >= deadline:
                raise TimeoutError(_pending_reason(pod))
            self.sleep(POLL_SECONDS)

    def wait_condition(self, kind: str, namespace: str, name: str, done: tuple[str, ...],
                       deadline: float) -> str:
        """The first condition type in `done` that is True (e.g. Succeeded, Failed)."""
        while True:
            obj = self.read(kind, namespace, name)
            for condition in (obj.get("status") or {}).get("conditions") or []:
                if condition.get("type") in done and condition.get("status") == "True":
                    return condition["type"]
            if self.clock() >= deadline:
                raise TimeoutError(f"{kind} {name} reached none of {', '.join(done)}")
            self.sleep(POLL_SECONDS)

    def cleanup(self, *namespaces: str) -> list[str]:
        """Deletes what this run created, by its label; returns what could not be deleted."""
        failed = []
        for namespace in namespaces:
            for kind in NAMESPACED_CLEANUP:
                try:
                    self.client.request("DELETE", f"{path_of(kind, namespace)}?labelSelector="
                                        f"{self.selector}", accept=(200, 202, 404))
                except ApiError as error:
                    failed.append(f"{kind} in {namespace}: {error}")
        try:
            namespaces = self.client.list(f"/api/v1/namespaces?labelSelector={self.selector}")
            for item in namespaces:
                self.client.request("DELETE", path_of("Namespace", None, item["metadata"]["name"]),
                                    accept=(200, 202, 404))
        except ApiError as error:
            failed.append(f"Namespace: {error}")
        return failed


def _pending_reason(pod: dict) -> str:
    status = pod.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return f"not scheduled: {condition.get('message') or condition.get('reason')}"
    for container in status.get("containerStatuses") or status.get("initContainerStatuses") or []:
        waiting = (container.get("state") or {}).get("waiting")
        if waiting:
            return f"container {container.get('name')} waiting: {waiting.get('reason')}"
    return f"still {status.get('phase') or 'Pending'}"
