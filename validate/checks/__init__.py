"""The checks: each builds its objects (validate/manifests.py), runs them through the API
with a deadline, reads their output and gives a verdict per subject (a node, the cluster)."""

import hashlib
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from contract.kubeapi import ApiError
from contract.names import POOL_LABEL
from contract.stack import Stack
from validate.kube import Kube
from validate.report import FAIL, PASS, UNCHECKED, Verdict
from validate.thresholds import Thresholds

OUTPUT_LIMIT = 20000  # characters of a tool's output kept in the reports


@dataclass(frozen=True)
class Options:
    timeout: int = 900
    mpi_timeout: int = 3600
    dcgm_level: int = 1
    nccl_min_busbw: Optional[float] = None
    nccl_min_busbw_multi: Optional[float] = None
    link_fraction: Optional[float] = None
    fio_min_mib_s: Optional[float] = None
    fio_size_mib: int = 1024
    acceptance_dir: Optional[str] = None
    skip: tuple[str, ...] = ()


@dataclass(frozen=True)
class GpuNode:
    name: str
    gpus: int
    models: list
    node: Optional[dict]  # the API's Node, None when it is missing


@dataclass
class Context:
    kube: Kube
    namespace: str
    stack: Stack
    options: Options
    thresholds: Thresholds
    progress: Callable[[str], None]
    nodes: list[dict] = field(default_factory=list)
    # The namespace of the checks that need host access (privileged: validate/manifests.py
    # namespace); `namespace` itself is restricted.
    host_namespace: str = ""

    def node(self, name: str) -> Optional[dict]:
        return next((n for n in self.nodes if n["metadata"]["name"] == name), None)

    def gpu_nodes(self) -> list[GpuNode]:
        """Hosts with GPUs from the stack output `nodes`, and every Node of a GPU pool."""
        found = [GpuNode(n.name, n.gpus, [n.gpu_model or ""], self.node(n.name))
                 for n in self.stack.nodes if n.gpus > 0 and n.runs_kubelet]
        for pool in self.stack.pools:
            if pool.gpus:
                found += [GpuNode(n["metadata"]["name"], pool.gpus, [], n) for n in self.nodes
                          if (n["metadata"].get("labels") or {}).get(POOL_LABEL) == pool.name]
        return [GpuNode(g.name, g.gpus, g.models + [_product(g.node)], g.node) for g in found]

    def deadline(self, seconds: Optional[int] = None) -> float:
        return self.kube.clock() + (seconds or self.options.timeout)


def _product(node: Optional[dict]) -> str:
    # GPU Feature Discovery's label, e.g. NVIDIA-H100-80GB-HBM3.
    return ((node or {}).get("metadata", {}).get("labels") or {}).get("nvidia.com/gpu.product", "")


def clip(text: str) -> str:
    # XML 1.0 admits no control characters but tab and newline; logs may hold some.
    text = "".join(c for c in text if c in "\t\n" or ord(c) >= 0x20)
    return text if len(text) <= OUTPUT_LIMIT else "...\n" + text[-OUTPUT_LIMIT:]


Judge = Callable[[dict, str], Verdict]


def run_pods(ctx: Context, check: str, items: list[tuple[str, dict, Judge]],
             timeout: Optional[int] = None) -> list[Verdict]:
    """Creates every pod, then waits for each and judges its log. A pod that does not end
    within the check's time is could-not-check, with why it was still pending."""
    started = ctx.kube.clock()
    deadline = ctx.deadline(timeout)
    created, verdicts = [], []
    for subject, manifest, judge in items:
        try:
            ctx.kube.create(manifest)
            created.append((subject, manifest, judge))
        except ApiError as error:
            verdicts.append(Verdict(check, subject, UNCHECKED, f"could not create the pod: {error}"))
    for subject, manifest, judge in created:
        name, namespace = manifest["metadata"]["name"], manifest["metadata"]["namespace"]
        ctx.progress(f"{check} {subject}: waiting for pod {name}")
        try:
            pod = ctx.kube.wait_pod(namespace, name, deadline)
            log = ctx.kube.log(namespace, name)
            verdict = judge(pod, log)
            verdict.output = clip(log)
        except TimeoutError as error:
            verdict = Verdict(check, subject, UNCHECKED,
                              f"pod {name} did not finish within {timeout or ctx.options.timeout}"
                              f" s ({error})")
        except ApiError as error:
            verdict = Verdict(check, subject, UNCHECKED, f"pod {name}: {error}")
        verdict.seconds = round(ctx.kube.clock() - started, 1)
        ctx.progress(f"{check} {subject}: {verdict.status}")
        verdicts.append(verdict)
    return verdicts


def pod_failed(pod: dict) -> Optional[str]:
    """Why a finished pod failed (its container's exit code and reason), None if it succeeded."""
    status = pod.get("status") or {}
    if status.get("phase") == "Succeeded":
        return None
    for container in status.get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated") or {}
        if terminated:
            return (f"container {container.get('name')} exited {terminated.get('exitCode')}"
                    f" ({terminated.get('reason') or 'Error'})")
    return f"pod {status.get('phase')}: {status.get('reason') or status.get('message') or ''}"


def verdict(check: str, subject: str, problems: list[str], ok: str, **extra) -> Verdict:
    if problems:
        return Verdict(check, subject, FAIL, "\n".join(problems), **extra)
    return Verdict(check, subject, PASS, ok, **extra)


def timed(now: Callable[[], float] = time.monotonic):
    start = now()
    return lambda: round(now() - start, 1)


def bounded(name: str, limit: int = 63) -> str:
    """A pod name from a node name: DNS-1123, at most `limit` characters."""

    clean = "".join(c if c.isalnum() or c == "-" else "-" for c in name.lower()).strip("-")
    if len(clean) <= limit:
        return clean
    return f"{clean[:limit - 9].rstrip('-')}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
