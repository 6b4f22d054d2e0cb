r"""Acceptance workloads: Kubernetes files that prove a freshly built cluster works.

`render(settings)` turns the stack config into files (name -> list of objects) and
`dump(objects)` gives one file's YAML; the offline preview writes them to
`build/<stack>/acceptance/`. After `pulumi up`, apply each file and read its logs (every file but
the teams' carries the `gpu-acceptance` Namespace, so each one applies on its own):

    # Every GPU host: nvidia-smi sees the requested GPUs, then the CUDA vectorAdd sample runs.
    kubectl apply -f build/<stack>/acceptance/gpu-smoke.yaml
    kubectl -n gpu-acceptance wait --for=condition=complete job \
        -l app.kubernetes.io/component=gpu-smoke --timeout=30m
    kubectl -n gpu-acceptance logs job/gpu-smoke-<host> -c nvidia-smi
    kubectl -n gpu-acceptance logs job/gpu-smoke-<host>

    # The default StorageClass: two pods on different nodes share one volume.
    kubectl apply -f build/<stack>/acceptance/rwx-check.yaml
    kubectl -n gpu-acceptance wait --for=condition=complete job/rwx-check --timeout=30m
    kubectl -n gpu-acceptance logs -l batch.kubernetes.io/job-name=rwx-check --prefix

    # Every GPU host together: nccl-tests' all_reduce_perf over NCCL (MPI operator); with
    # mpi.nccl.infiniband it fails unless NCCL used its IB transport.
    kubectl apply -f build/<stack>/acceptance/mpijob-benchmark.yaml
    kubectl -n gpu-acceptance wait --for=condition=Succeeded mpijob/nccl-tests --timeout=60m
    kubectl -n gpu-acceptance logs job/nccl-tests-launcher
    # The same log read again outside the cluster (acceptance/nccl_results.py):
    kubectl -n gpu-acceptance logs job/nccl-tests-launcher \
        | python -m acceptance.nccl_results --network IB --nodes <GPU hosts>

    # A team's own multi-node GPU job, in the team's namespace under Pod Security
    # restricted (acceptance/mpi_team.py); a user of the team with `edit` may apply it too.
    kubectl apply -f build/<stack>/acceptance/mpijob-team-<team>.yaml
    kubectl -n <team> wait --for=condition=Succeeded mpijob/nccl-team-check --timeout=60m
    kubectl -n <team> logs job/nccl-team-check-launcher
    kubectl -n <team> delete mpijob nccl-team-check

A failed check leaves a failed Job (`kubectl -n gpu-acceptance get jobs,pods`). Finished Jobs are
removed after an hour; to run a check again sooner, delete its Jobs first, e.g.
`kubectl -n gpu-acceptance delete job -l app.kubernetes.io/component=gpu-smoke`.
`kubectl delete namespace gpu-acceptance` removes every check and the test volume.

Files without anything to check are not rendered: no `gpu-smoke.yaml` and no
`mpijob-benchmark.yaml` when no host that runs workloads has GPUs, no
`mpijob-benchmark.yaml` and no `mpijob-team-*.yaml` when `mpi.operator` is off (the MPIJob
kind would not exist), and no `mpijob-team-<team>.yaml` for a team whose quota allows no GPU.
"""

__all__ = ["NAMESPACE", "dump", "render"]


def __getattr__(name: str):
    # Loaded on first use (PEP 562): the renderers need the program's config model, while
    # `acceptance.nccl_results` is also read by `python -m validate`, which runs without it.
    if name in __all__:
        from acceptance import workloads
        return getattr(workloads, name)
    raise AttributeError(f"module 'acceptance' has no attribute {name!r}")
