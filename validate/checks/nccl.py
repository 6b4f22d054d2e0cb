"""NCCL: nccl-tests' all_reduce_perf on each GPU node (every GPU of it), then across the GPU
nodes with the acceptance MPIJob the preview rendered. Judged on correctness (as the
launcher judges it, acceptance/nccl_results.py) and on the largest message's bus bandwidth
against a floor: validate/thresholds.yaml by GPU model, a flag, or over TCP sockets a share
of the slowest link measured with iperf3 first."""

from pathlib import Path
from typing import Optional

import yaml

from contract.kubeapi import ApiError
from validate import manifests
from validate.checks import Context, bounded, clip, pod_failed, run_pods, timed, verdict
from validate.parse import NcclResult, nccl_problems, parse_iperf3, parse_nccl
from validate.report import FAIL, PASS, SKIPPED, UNCHECKED, Verdict

MPI_FILE = "mpijob-benchmark.yaml"
# Labels the MPI operator (v2beta1) puts on the pods it makes for an MPIJob.
MPI_JOB_NAME_LABEL = "training.kubeflow.org/job-name"
MPI_ROLE_LABEL = "training.kubeflow.org/job-role"


def largest_busbw(result: NcclResult) -> Optional[float]:
    row = result.largest
    return max(row.out_of_place.busbw_gbps, row.in_place.busbw_gbps) if row else None


def _judge_bandwidth(check: str, subject: str, result: NcclResult, floor: Optional[float],
                     floor_source: str, network: Optional[str], nodes: int,
                     failed: Optional[str]) -> Verdict:
    problems = ([failed] if failed else []) + nccl_problems(result, network, nodes)
    busbw = largest_busbw(result)
    measured = {"largestBusbwGBps": busbw, "avgBusbwGBps": result.avg_bus_bandwidth,
                "largestBytes": result.largest.size_bytes if result.largest else None,
                "transports": sorted(result.transports)}
    threshold = {"minBusbwGBps": floor, "source": floor_source} if floor is not None else None
    if busbw is not None and floor is not None and busbw < floor:
        problems.append(f"bus bandwidth {busbw} GB/s at {result.largest.size_bytes} B is under "
                        f"the floor {floor:g} GB/s ({floor_source})")
    judged = (f"floor {floor:g} GB/s ({floor_source})" if floor is not None
              else "bandwidth not judged: no floor for this hardware (--nccl-min-busbw sets one)")
    return verdict(check, subject, problems,
                   f"busbw {busbw} GB/s at the largest message; {judged}",
                   measured=measured, threshold=threshold)


def single_node(ctx: Context) -> list[Verdict]:
    verdicts, items = [], []
    for gpu in ctx.gpu_nodes():
        if gpu.node is None:
            verdicts.append(Verdict("nccl-node", gpu.name, UNCHECKED, "no Node of this name"))
            continue
        if gpu.gpus < 2:
            verdicts.append(Verdict("nccl-node", gpu.name, SKIPPED,
                                    "one GPU: no collective within the node"))
            continue
        if ctx.options.nccl_min_busbw is not None:
            floor, source = ctx.options.nccl_min_busbw, "--nccl-min-busbw"
        else:
            entry = ctx.thresholds.single(gpu.models, gpu.gpus)
            floor, source = ((entry.min_busbw_gbps, f"{entry.name}; {entry.source}") if entry
                             else (None, ""))

        def judge(pod, log, subject=gpu.name, floor=floor, source=source):
            return _judge_bandwidth("nccl-node", subject, parse_nccl(log), floor, source, None, 1,
                                    pod_failed(pod))

        items.append((gpu.name, manifests.nccl_node(bounded(f"nccl-{gpu.name}"), ctx.namespace,
                                                    ctx.kube.run_id, gpu.node, gpu.gpus,
                                                    ctx.options.timeout), judge))
    return verdicts + run_pods(ctx, "nccl-node", items)


def _rendered_mpijob(ctx: Context) -> Optional[dict]:
    folder = ctx.options.acceptance_dir
    if not folder:
        return None
    path = Path(folder) / MPI_FILE
    if not path.is_file():
        return None
    documents = [d for d in yaml.safe_load_all(path.read_text()) if d]
    return next((d for d in documents if d.get("kind") == "MPIJob"), None)


def link_baseline(ctx: Context, gpus: list) -> tuple[Optional[float], list[Verdict]]:
    """iperf3 from each GPU node to the next (a ring, as NCCL's ring runs): the slowest
    link's rate in GB/s, and a verdict per link. On the host network, in the privileged
    namespace: the link measured is the one the fabric MPIJob's NCCL uses."""
    verdicts, rates = [], []
    for index, server in enumerate(gpus):
        client = gpus[(index + 1) % len(gpus)]
        if len(gpus) == 2 and index == 1:
            break  # two nodes: one link
        subject = f"{client.name} -> {server.name}"
        clock = timed(ctx.kube.clock)
        server_name = bounded(f"iperf3-s-{server.name}")
        client_name = bounded(f"iperf3-c-{client.name}")
        try:
            ctx.progress(f"link-baseline {subject}: iperf3")
            host = ctx.host_namespace
            ctx.kube.create(manifests.iperf3_server(server_name, host, ctx.kube.run_id,
                                                    server.node, ctx.options.timeout))
            served = ctx.kube.wait_running(host, server_name, ctx.deadline())
            address = served["status"]["podIP"]  # the host network: the node's address
            ctx.kube.create(manifests.iperf3_client(client_name, host, ctx.kube.run_id,
                                                    client.node, address, ctx.options.timeout))
            pod = ctx.kube.wait_pod(host, client_name, ctx.deadline())
            log = ctx.kube.log(host, client_name)
            bits = parse_iperf3(log)
        except (ApiError, TimeoutError, RuntimeError, ValueError) as error:
            verdicts.append(Verdict("link-baseline", subject, UNCHECKED, f"iperf3: {error}",
                                    seconds=clock()))
            continue
        gbytes = bits / 8e9
        rates.append(gbytes)
        failed = pod_failed(pod)
        verdicts.append(Verdict("link-baseline", subject, FAIL if failed else PASS,
                                failed or f"{bits / 1e9:.2f} Gbit/s ({gbytes:.3f} GB/s)",
                                seconds=clock(), measured={"bitsPerSecond": bits},
                                output=clip(log)))
    return (min(rates) if rates and len(rates) == len(verdicts) else None), verdicts


def multi_node(ctx: Context) -> list[Verdict]:
    gpus = [g for g in ctx.gpu_nodes() if g.node is not None]
    subject = f"{len(gpus)} GPU nodes"
    if len(gpus) < 2:
        return [Verdict("nccl-cluster", subject, SKIPPED,
                        "fewer than two GPU nodes: nccl-node covers the one there is")]
    rendered = _rendered_mpijob(ctx)
    if rendered is None:
        return [Verdict("nccl-cluster", subject, UNCHECKED,
                        f"no {MPI_FILE} under --acceptance "
                        f"'{ctx.options.acceptance_dir or ''}': run the offline preview "
                        "(`make preview STACK=<stack>`, build/<stack>/acceptance/) with "
                        "mpi.operator on")]
    network = manifests.nccl_net(rendered)
    verdicts: list[Verdict] = []
    floor, source = ctx.options.nccl_min_busbw_multi, "--nccl-min-busbw-multi"
    if floor is None and network == "Socket":
        baseline, verdicts = link_baseline(ctx, gpus)
        fraction = ctx.options.link_fraction or ctx.thresholds.link_fraction
        if baseline is None:
            return verdicts + [Verdict("nccl-cluster", subject, UNCHECKED,
                                       "no link baseline: iperf3 did not measure every link")]
        floor = round(baseline * fraction, 3)
        source = (f"{fraction:g} x the slowest link measured by iperf3 ({baseline:.3f} GB/s); "
                  f"share: {ctx.thresholds.link_fraction_source}"
                  if not ctx.options.link_fraction else
                  f"{fraction:g} (--link-fraction) x iperf3's slowest link {baseline:.3f} GB/s")
    # The fabric MPIJob uses the host network: the privileged namespace.
    job = manifests.mpijob(rendered, ctx.host_namespace, ctx.kube.run_id)
    name = job["metadata"]["name"]
    clock = timed(ctx.kube.clock)
    ctx.progress(f"nccl-cluster: MPIJob {name} across {subject}")
    try:
        ctx.kube.create(job)
        ctx.kube.wait_condition("MPIJob", ctx.host_namespace, name, ("Succeeded", "Failed"),
                                ctx.deadline(ctx.options.mpi_timeout))
        selector = f"{MPI_JOB_NAME_LABEL}={name},{MPI_ROLE_LABEL}=launcher"
        launchers = ctx.kube.pods(ctx.host_namespace, selector)
        if not launchers:
            raise RuntimeError("no launcher pod")
        launcher = launchers[-1]
        log = ctx.kube.log(ctx.host_namespace, launcher["metadata"]["name"])
    except (ApiError, TimeoutError, RuntimeError) as error:
        return verdicts + [Verdict("nccl-cluster", subject, UNCHECKED, f"MPIJob {name}: {error}",
                                   seconds=clock())]
    result = _judge_bandwidth("nccl-cluster", subject, parse_nccl(log), floor, source,
                              "IB" if network == "IB" else None, len(gpus),
                              pod_failed(launcher))
    result.seconds, result.output = clock(), clip(log)
    ctx.progress(f"nccl-cluster: {result.status}")
    return verdicts + [result]
