"""GPUs: allocatable nvidia.com/gpu as configured, the CUDA vectorAdd sample, `dcgmi diag`."""

from validate import manifests
from validate.checks import Context, bounded, pod_failed, run_pods, verdict
from validate.parse import parse_dcgmi
from validate.report import FAIL, PASS, UNCHECKED, Verdict


def allocatable(ctx: Context) -> list[Verdict]:
    verdicts = []
    for gpu in ctx.gpu_nodes():
        if gpu.node is None:
            verdicts.append(Verdict("gpu-allocatable", gpu.name, FAIL,
                                    "no Node of this name in the cluster"))
            continue
        value = ((gpu.node.get("status") or {}).get("allocatable") or {}).get(
            manifests.GPU_RESOURCE)
        try:
            found = int(value or 0)
        except ValueError:
            found = -1
        # Time-slicing offers more than the physical count: at least the configured count.
        ok = found >= gpu.gpus
        verdicts.append(Verdict(
            "gpu-allocatable", gpu.name, PASS if ok else FAIL,
            f"{found} {manifests.GPU_RESOURCE} allocatable, {gpu.gpus} configured",
            measured={"allocatable": found}, threshold={"configured": gpu.gpus}))
    return verdicts


def _ready(ctx: Context, check: str) -> tuple[list, list[Verdict]]:
    """GPU nodes a pod can run on; the others are could-not-check here (allocatable says why)."""
    usable, skipped = [], []
    for gpu in ctx.gpu_nodes():
        if gpu.node is None:
            skipped.append(Verdict(check, gpu.name, UNCHECKED, "no Node of this name"))
        else:
            usable.append(gpu)
    return usable, skipped


def cuda_smoke(ctx: Context) -> list[Verdict]:
    usable, verdicts = _ready(ctx, "cuda-smoke")

    def judge_for(subject):
        def judge(pod, log):
            failed = pod_failed(pod)
            problems = [failed] if failed else []
            if "Test PASSED" not in log:
                problems.append("vectorAdd did not print 'Test PASSED'")
            return verdict("cuda-smoke", subject, problems, "vectorAdd: Test PASSED")
        return judge

    items = [(g.name, manifests.cuda_smoke(bounded(f"cuda-smoke-{g.name}"), ctx.namespace,
                                           ctx.kube.run_id, g.node, g.gpus,
                                           ctx.options.timeout), judge_for(g.name))
             for g in usable]
    return verdicts + run_pods(ctx, "cuda-smoke", items)


def dcgm_diag(ctx: Context) -> list[Verdict]:
    usable, verdicts = _ready(ctx, "dcgm-diag")
    level = ctx.options.dcgm_level

    def judge_for(subject):
        def judge(pod, log):
            diag = parse_dcgmi(log)
            failed = diag.with_result("Fail")
            warned = diag.with_result("Warn")
            # "Hardware / GPU Memory: Fail - GPU: 3" (rest: the GPUs when not all failed).
            problems = [f"{section} / {name}: Fail" + (f" - {rest}" if rest else "")
                        for section, name, _, rest in failed]
            problems += diag.details if failed else []
            exit_problem = pod_failed(pod)
            if not diag.ran:
                return Verdict("dcgm-diag", subject, FAIL if exit_problem else UNCHECKED,
                               f"dcgmi diag -r {level} did not run its diagnostic"
                               + (f" ({exit_problem})" if exit_problem else ""))
            if exit_problem and not problems:
                problems.append(f"dcgmi diag -r {level}: {exit_problem}")
            ok = (f"dcgmi diag -r {level}: {len(diag.with_result('Pass'))} passed, "
                  f"{len(diag.with_result('Skip', 'Not Run'))} skipped"
                  + (f", warnings: {'; '.join(n for _, n, _, _ in warned)}" if warned else ""))
            return verdict("dcgm-diag", subject, problems, ok,
                           measured={"tests": [list(t) for t in diag.tests]})
        return judge

    # In the privileged namespace: dcgmi needs SYS_ADMIN (validate/manifests.py dcgm_diag).
    items = [(g.name, manifests.dcgm_diag(bounded(f"dcgm-diag-{g.name}"), ctx.host_namespace,
                                          ctx.kube.run_id, g.node, g.gpus, level,
                                          ctx.options.timeout), judge_for(g.name))
             for g in usable]
    return verdicts + run_pods(ctx, "dcgm-diag", items)
