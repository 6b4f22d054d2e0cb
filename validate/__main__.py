"""`gpu-cluster validate STACK` (or `python -m validate`): runs workloads on a built cluster
and judges what they print: GPUs allocatable, CUDA, DCGM diagnostics, NCCL bandwidth on each
GPU node and across them, shared storage and its throughput. Writes a table, and on request
JSON (`--json [FILE.json]`) and JUnit XML, also when nothing could be checked.

Exit codes: 0 every check passed (or was skipped), 1 a check failed, 2 could not check
(outputs unreadable, API unreachable, a check that did not finish in its time)."""

import argparse
import os
import secrets
import signal
import sys
import tempfile
import time

from contract import ContractError, command
from contract import stack as stack_outputs
from contract.kubeapi import ApiError, Client
from validate import ValidateError, report, thresholds
from validate.checks import Context, Options, gpus, nccl, storage
from validate.kube import Kube
from validate.manifests import PRIVILEGED, host_namespace
from validate.manifests import namespace as namespace_object
from validate.report import UNCHECKED, Verdict

PROG = "python -m validate"
# name -> the function giving its verdicts, in the order they run.
CHECKS = {
    "gpu-allocatable": gpus.allocatable,
    "cuda-smoke": gpus.cuda_smoke,
    "dcgm-diag": gpus.dcgm_diag,
    "nccl-node": nccl.single_node,
    "nccl-cluster": nccl.multi_node,
    "storage-rwx": storage.rwx,
    "storage-fio": storage.fio,
}


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0],
                                     epilog=command.EXIT_CODES_DOC)
    command.add_stack(parser)
    parser.add_argument("--acceptance", metavar="DIR",
                        help="the rendered acceptance files (default build/STACK/acceptance)")
    command.add_json(parser)
    parser.add_argument("--junit", metavar="FILE", help="write JUnit XML here (for CI)")
    parser.add_argument("--skip", action="append", default=[], choices=sorted(CHECKS),
                        help="leave a check out (repeatable)")
    parser.add_argument("--timeout", type=int, default=900, metavar="S",
                        help="seconds each check may take (default %(default)s)")
    parser.add_argument("--mpi-timeout", type=int, default=3600, metavar="S",
                        help="seconds the multi-node MPIJob may take (default %(default)s)")
    parser.add_argument("--dcgm-level", type=int, choices=(1, 2, 3, 4), default=1,
                        help="dcgmi diag -r LEVEL (default %(default)s: seconds; 3 and 4 take "
                             "tens of minutes, raise --timeout)")
    parser.add_argument("--nccl-min-busbw", type=float, metavar="GB/s",
                        help="floor for each node's run, instead of validate/thresholds.yaml")
    parser.add_argument("--nccl-min-busbw-multi", type=float, metavar="GB/s",
                        help="floor for the run across nodes (over IB there is no default)")
    parser.add_argument("--link-fraction", type=float, metavar="F",
                        help="over TCP sockets: share of iperf3's slowest link NCCL must reach "
                             "(default from validate/thresholds.yaml)")
    parser.add_argument("--fio-min-mib-s", type=float, metavar="MiB/s",
                        help="floor for fio's sequential write and read (unset: not judged)")
    parser.add_argument("--fio-size-mib", type=int, default=1024, metavar="MiB",
                        help="fio's file size (default %(default)s)")
    return parser


def _project_dir() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Progress:
    """One line per step on stderr, with the time since the start."""

    def __init__(self, stream=sys.stderr):
        self.stream, self.start = stream, time.monotonic()

    def __call__(self, message: str) -> None:
        print(f"[{time.monotonic() - self.start:6.0f}s] {message}", file=self.stream, flush=True)


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _report(args: argparse.Namespace, verdicts: list[Verdict], source: str,
            server: str) -> int:
    """The table, the JSON report and the JUnit file asked for."""
    command.report(args, report.table(verdicts, source, server),
                   report.as_json(verdicts, source, server))
    if args.junit:
        with open(args.junit, "w") as handle:
            handle.write(report.junit(verdicts, source))
    return report.exit_code(verdicts)


def _could_not_check(args: argparse.Namespace, subject: str, message: str, source: str,
                     server: str) -> int:
    """Nothing could be checked: the message on stderr, and the reports all the same, with
    one could-not-check verdict (JUnit: an <error>), so CI reads why."""
    print(f"error: {message}", file=sys.stderr)
    return _report(args, [Verdict("setup", subject, UNCHECKED, message)], source, server)


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    args = build_parser(prog).parse_args(argv)
    progress = Progress()
    source = "no stack named"
    try:
        command.stack_argument(args)
        source = stack_outputs.planned_source(args.stack, args.outputs)
        command.source(args)
        if args.link_fraction is not None and not 0 < args.link_fraction <= 1:
            raise ValidateError("--link-fraction must be in (0, 1]")
        known = stack_outputs.read(args.stack, args.outputs, args.cwd or _project_dir())
        limits = thresholds.load()
    except (ValidateError, ContractError) as error:
        return _could_not_check(args, "stack outputs", str(error), source, "")
    acceptance = args.acceptance or (
        os.path.join(_project_dir(), "build", args.stack, "acceptance") if args.stack else None)
    options = Options(timeout=args.timeout, mpi_timeout=args.mpi_timeout,
                      dcgm_level=args.dcgm_level, nccl_min_busbw=args.nccl_min_busbw,
                      nccl_min_busbw_multi=args.nccl_min_busbw_multi,
                      link_fraction=args.link_fraction, fio_min_mib_s=args.fio_min_mib_s,
                      fio_size_mib=args.fio_size_mib, acceptance_dir=acceptance,
                      skip=tuple(args.skip))
    run_id = secrets.token_hex(4)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    verdicts: list[Verdict] = []
    server = ""
    try:
        with tempfile.TemporaryDirectory(prefix="validate-") as folder:  # mode 0700
            client = Client(known.kubeconfig, folder)
            server = client.server
            kube = Kube(client, run_id)
            verdicts = _run(kube, known, options, limits, progress)
            client.session.close()
    except (ContractError, ValidateError) as error:
        return _could_not_check(args, "cluster", str(error), known.source,
                                server or known.kubeconfig.server)
    except KeyboardInterrupt:
        print("interrupted; what this run created is deleted", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001 - one line, never a traceback with key material
        if os.environ.get("VALIDATE_DEBUG"):
            raise
        return _could_not_check(args, "cluster", f"unexpected {type(error).__name__}; "
                                "VALIDATE_DEBUG=1 shows where", known.source,
                                server or known.kubeconfig.server)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return _report(args, verdicts, known.source, server)


def _run(kube: Kube, known, options: Options, limits, progress) -> list[Verdict]:
    namespace = f"gpu-validate-{kube.run_id}"
    host = host_namespace(namespace)
    try:
        nodes = kube.nodes()
    except ApiError as error:
        raise ValidateError(f"the cluster's API: {error}") from None
    context = Context(kube, namespace, known, options, limits, progress, nodes,
                      host_namespace=host)
    progress(f"run {kube.run_id}: namespaces {namespace} (restricted), {host} (privileged), "
             f"{len(context.gpu_nodes())} GPU node(s), {len(nodes)} node(s)")
    verdicts: list[Verdict] = []
    try:
        kube.create(namespace_object(namespace, kube.run_id))
        kube.create(namespace_object(host, kube.run_id, PRIVILEGED))
        for name, check in CHECKS.items():
            if name in options.skip:
                continue
            progress(f"{name}: start")
            try:
                verdicts += check(context)
            except ApiError as error:
                verdicts.append(Verdict(name, "cluster", UNCHECKED, str(error)))
    except ApiError as error:
        verdicts.append(Verdict("setup", namespace, UNCHECKED, str(error)))
    finally:
        # Also on Ctrl-C and SIGTERM: everything labelled with this run goes.
        progress(f"cleanup: deleting what run {kube.run_id} created")
        for problem in kube.cleanup(namespace, host):
            print(f"warning: cleanup: {problem}", file=sys.stderr)
    return verdicts


if __name__ == "__main__":
    sys.exit(main())
