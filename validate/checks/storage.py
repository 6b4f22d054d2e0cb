"""Shared storage: a ReadWriteMany claim of the default StorageClass written and read from
two nodes, and fio's sequential throughput on a claim of it against a floor."""

from contract.names import POOL_LABEL
from validate import manifests
from validate.checks import Context, pod_failed, run_pods, verdict
from validate.parse import parse_fio
from validate.report import SKIPPED, UNCHECKED, Verdict

MIB = 1024 * 1024


def _worker_nodes(ctx: Context) -> list[dict]:
    """Nodes that run workloads, Ready and schedulable, in the stack's order."""
    names = [n.name for n in ctx.stack.nodes if n.runs_kubelet]
    names += [n["metadata"]["name"] for n in ctx.nodes
              if (n["metadata"].get("labels") or {}).get(POOL_LABEL)]
    found = []
    for name in names:
        node = ctx.node(name)
        if node is None or (node.get("spec") or {}).get("unschedulable"):
            continue
        conditions = (node.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            found.append(node)
    return found


def _storage_class(ctx: Context) -> str:
    return ctx.stack.default_storage_class or ""


def rwx(ctx: Context) -> list[Verdict]:
    nodes = _worker_nodes(ctx)
    storage_class = _storage_class(ctx)
    subject = f"class {storage_class or '(none)'}"
    if not storage_class:
        return [Verdict("storage-rwx", subject, UNCHECKED,
                        "the stack output defaultStorageClass is missing")]
    if len(nodes) < 2:
        return [Verdict("storage-rwx", subject, SKIPPED,
                        "fewer than two Ready nodes run workloads: nothing to share across")]
    first, second = nodes[0], nodes[1]
    claim_name = "rwx"
    try:
        ctx.kube.create(manifests.claim(claim_name, ctx.namespace, ctx.kube.run_id,
                                        storage_class, "ReadWriteMany"))
    except Exception as error:  # ApiError: the class refuses or the API does
        return [Verdict("storage-rwx", subject, UNCHECKED, f"could not create the claim: {error}")]
    names = [n["metadata"]["name"] for n in (first, second)]
    pair = f"{subject}, nodes {names[0]} and {names[1]}"

    def judge(pod, log, me):
        failed = pod_failed(pod)
        problems = [failed] if failed else []
        if "read from-" not in log:
            problems.append(f"pod {me} did not read the other node's file: the volume is not "
                            "shared between the nodes")
        return verdict("storage-rwx", pair, problems,
                       f"{names[0]} and {names[1]} each read the file the other wrote")

    items = [(pair, manifests.rwx_pod(f"rwx-{me}", ctx.namespace, ctx.kube.run_id, me, peer,
                                      claim_name, node, ctx.options.timeout),
              lambda pod, log, me=me: judge(pod, log, me))
             for me, peer, node in (("a", "b", first), ("b", "a", second))]
    results = run_pods(ctx, "storage-rwx", items)
    worst = next((v for v in results if v.status != "pass"), results[0])
    worst.seconds = max(v.seconds for v in results)
    worst.output = "\n".join(v.output for v in results)
    return [worst]


def fio(ctx: Context) -> list[Verdict]:
    nodes = _worker_nodes(ctx)
    storage_class = _storage_class(ctx)
    subject = f"class {storage_class or '(none)'}"
    if not storage_class or not nodes:
        return [Verdict("storage-fio", subject, UNCHECKED,
                        "no default StorageClass in the outputs or no Ready node")]
    floor = ctx.options.fio_min_mib_s
    size = ctx.options.fio_size_mib
    try:
        ctx.kube.create(manifests.claim("fio", ctx.namespace, ctx.kube.run_id, storage_class,
                                        "ReadWriteOnce", f"{size * 2}Mi"))
    except Exception as error:
        return [Verdict("storage-fio", subject, UNCHECKED, f"could not create the claim: {error}")]

    def judge(pod, log):
        failed = pod_failed(pod)
        try:
            result = parse_fio(log)
        except ValueError as error:
            return verdict("storage-fio", subject, [failed or f"fio's output: {error}"], "")
        write, read = result.write_bytes_per_s / MIB, result.read_bytes_per_s / MIB
        problems = ([failed] if failed else []) + list(result.errors)
        for what, rate in (("write", write), ("read", read)):
            if floor is not None and rate < floor:
                problems.append(f"sequential {what} {rate:.1f} MiB/s is under the floor "
                                f"{floor:g} MiB/s (--fio-min-mib-s)")
        judged = (f"floor {floor:g} MiB/s" if floor is not None
                  else "not judged: no floor (--fio-min-mib-s sets one)")
        return verdict("storage-fio", subject, problems,
                       f"sequential write {write:.1f} MiB/s, read {read:.1f} MiB/s "
                       f"({size} MiB, 1 MiB blocks); {judged}",
                       measured={"writeMiBps": round(write, 1), "readMiBps": round(read, 1)},
                       threshold={"minMiBps": floor} if floor is not None else None)

    return run_pods(ctx, "storage-fio", [(subject, manifests.fio_pod(
        "fio", ctx.namespace, ctx.kube.run_id, "fio", size, nodes[0], ctx.options.timeout),
        judge)])
