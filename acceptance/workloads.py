"""Renders the acceptance workloads from the stack config (see the package docstring for how
they are applied). Everything is a plain dict, ready for `yaml.safe_dump_all`."""

import json

from acceptance.common import NAMESPACE, dump, gpu_hosts, gpu_targets, namespace
from acceptance.gpu_smoke import SMOKE_FILE, smoke_job
from acceptance.mpi_benchmark import MPI_FILE, mpi_benchmark
from acceptance.mpi_team import team_checks
from acceptance.rwx_check import RWX_FILE, rwx_check
from config.model import StackConfig

__all__ = ["NAMESPACE", "dump", "render"]


def render(settings: StackConfig) -> dict[str, list[dict]]:
    """File name -> Kubernetes objects; every file of the admin's checks starts with their
    Namespace, a team's MPIJob runs in the team's namespace."""
    files: dict[str, list[dict]] = {}
    targets = gpu_targets(settings)
    if targets:
        files[SMOKE_FILE] = [namespace(), *(smoke_job(settings, t) for t in targets)]
    files[RWX_FILE] = [namespace(), *rwx_check(settings)]
    # The MPI benchmark spans GPU hosts on the LAN (not yet cloud pools).
    if gpu_hosts(settings) and settings.mpi.operator:
        files[MPI_FILE] = [namespace(), mpi_benchmark(settings)]
    files.update(team_checks(settings))
    # Independent copies: no object shares a dict with another, so YAML gets no anchors.
    return {name: [json.loads(json.dumps(obj)) for obj in objects]
            for name, objects in files.items()}

