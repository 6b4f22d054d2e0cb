"""The acceptance files of the test cases, rendered once, and accessors for their parts."""

import functools

from acceptance import render
from tests.acceptance.cases import CASES, objects_of_kind, settings_of

HOSTNAME = "kubernetes.io/hostname"


@functools.lru_cache(maxsize=None)
def rendered(name: str) -> dict[str, list[dict]]:
    return render(settings_of(CASES[name]))


def only(objects: list[dict], kind: str) -> dict:
    found = objects_of_kind(objects, kind)
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def smoke_jobs_by_node(name: str) -> dict[str, dict]:
    jobs = objects_of_kind(rendered(name)["gpu-smoke.yaml"], "Job")
    by_node = {job["spec"]["template"]["spec"]["nodeSelector"][HOSTNAME]: job for job in jobs}
    assert len(by_node) == len(jobs), "two smoke Jobs on one node"
    return by_node


def mpijob_parts(name: str):
    mpijob = only(rendered(name)["mpijob-benchmark.yaml"], "MPIJob")
    replicas = mpijob["spec"]["mpiReplicaSpecs"]
    launcher, worker = replicas["Launcher"], replicas["Worker"]
    (launcher_container,) = launcher["template"]["spec"]["containers"]
    (worker_container,) = worker["template"]["spec"]["containers"]
    return mpijob, launcher, worker, launcher_container, worker_container
