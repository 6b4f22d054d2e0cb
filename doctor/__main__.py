"""`gpu-cluster doctor STACK` (or `python -m doctor`): checks a running cluster, read-only,
for the failures users hit, each with a verdict and the fix.

Exit codes: 0 all ok (or warnings only), 1 problems found, 2 could not check (outputs
unreadable, the API unreachable, a check without its data); the JSON report is written in
each case."""

import argparse
import os
import sys

from contract import ContractError, command, stack
from doctor import DoctorError, drift, hosts, kubeapi, report
from doctor.checks import Context
from doctor.checks.every import run
from doctor.checks.gpus import wanted_logs
from doctor.findings import EXIT_UNCHECKED, exit_code, unchecked

PROG = "python -m doctor"


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0],
                                     epilog=command.EXIT_CODES_DOC)
    command.add_stack(parser)
    command.add_json(parser)
    parser.add_argument("--all", action="store_true", help="list the ok findings too")
    hosts_group = parser.add_argument_group(
        "host checks (address, routes, MTU, inotify, resolv.conf, GPUs seen)")
    hosts_group.add_argument("--host-outputs", metavar="DIR",
                             help="recorded command outputs, DIR/<host>/<file> (see README)")
    hosts_group.add_argument("--ssh", action="store_true",
                             help="collect them over SSH (BatchMode, read-only commands)")
    hosts_group.add_argument("--ssh-user", metavar="USER", help="with --ssh: the login")
    hosts_group.add_argument("--ssh-key", metavar="FILE", help="with --ssh: the private key")
    hosts_group.add_argument("--kubelet-resolv-conf", metavar="PATH",
                             default=hosts.KUBELET_RESOLV_CONF,
                             help="with --ssh: tuning.kubeletResolvConf when changed "
                                  "(default %(default)s)")
    hosts_group.add_argument("--drift", metavar="BUILD",
                             help="with --ssh or --host-outputs: check the host steps against "
                                  "the envelopes `python -m preview STACK` wrote to BUILD "
                                  "(build/STACK), changing nothing")
    return parser


def _project_dir() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _host_outputs(args: argparse.Namespace, known: stack.Stack) -> dict:
    names = [node.name for node in known.nodes]
    if args.ssh:
        return {node.name: hosts.collect_ssh(node.name, node.address, args.ssh_user,
                                             args.ssh_key, args.kubelet_resolv_conf,
                                             args.host_outputs)
                for node in known.nodes}
    if args.host_outputs:
        return hosts.read_recorded(args.host_outputs, names)
    return {}


def _drift(args: argparse.Namespace, known: stack.Stack) -> drift.Drift | None:
    if args.drift is None:
        return None
    if not (args.ssh or args.host_outputs):
        raise DoctorError("--drift goes with --ssh or --host-outputs")
    found = drift.envelopes(args.drift)
    if not args.ssh:
        return drift.Drift(found, drift.read_recorded(args.host_outputs, found))
    results = {}
    for host, envelopes in found.items():
        node = known.node(host)
        results[host] = drift.check_ssh(node.address, args.ssh_user, args.ssh_key, envelopes,
                                        args.host_outputs) if node else {
            hosts.UNREACHABLE: "not in the stack's nodes output: no address to reach it at"}
    return drift.Drift(found, results)


def _could_not_look(args: argparse.Namespace, subject: str, message: str, fix: str,
                    source: str, server: str) -> int:
    """The doctor could not look at all: the message on stderr, and the report all the same,
    one could-not-check finding, so a machine reading it learns why."""
    print(f"error: {message}", file=sys.stderr)
    command.write_json(args, report.as_json([unchecked("doctor", subject, message, fix)],
                                            source, server))
    return EXIT_UNCHECKED


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    args = build_parser(prog).parse_args(argv)
    # What could not be read yet, for a report of why the doctor stopped.
    subject, server, source = "stack outputs", "", "no stack named"
    try:
        command.stack_argument(args)
        source = stack.planned_source(args.stack, args.outputs)
        command.source(args)
        known = stack.read(args.stack, args.outputs, args.cwd or _project_dir())
        subject, source, server = "cluster", known.source, known.kubeconfig.server
        snapshot = kubeapi.collect(known.kubeconfig, wanted_logs)
        context = Context(known, snapshot, _host_outputs(args, known), _drift(args, known))
        findings = run(context)
    except (DoctorError, ContractError) as error:
        return _could_not_look(args, subject, str(error), "", source, server)
    except KeyboardInterrupt:
        return 130
    except Exception as error:  # noqa: BLE001 - one line, never a traceback with key material
        if os.environ.get("DOCTOR_DEBUG"):
            raise
        return _could_not_look(args, subject, f"unexpected {type(error).__name__}; "
                               "DOCTOR_DEBUG=1 shows where", "", source, server)
    command.report(args, report.table(findings, known.source, snapshot.server, args.all),
                   report.as_json(findings, known.source, snapshot.server))
    return exit_code(findings)


if __name__ == "__main__":
    sys.exit(main())
