"""`python -m doctor [STACK]`: checks a running cluster, read-only, for the failures users
hit, each with a verdict and the fix.

Exit codes: 0 all ok (or warnings only), 1 problems found, 2 could not check (outputs
unreadable, the API unreachable, a check without its data)."""

import argparse
import os
import sys

from contract import ContractError, stack
from doctor import DoctorError, drift, hosts, kubeapi, report
from doctor.checks import Context
from doctor.checks.every import run
from doctor.checks.gpus import wanted_logs
from doctor.findings import EXIT_UNCHECKED, exit_code, unchecked

PROG = "python -m doctor"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("stack", nargs="?", metavar="STACK",
                        help="read its outputs with `pulumi stack output --json --show-secrets`")
    parser.add_argument("--outputs", metavar="FILE.json",
                        help="a JSON export of `pulumi stack output --json --show-secrets` "
                             "instead (- for standard input)")
    parser.add_argument("--cwd", metavar="DIR",
                        help="with STACK: the Pulumi project folder (default: this project)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
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
    """The doctor could not look at all: the message on stderr, and with --json the report
    too, one could-not-check finding, so a machine reading stdout still gets one."""
    print(f"error: {message}", file=sys.stderr)
    if args.json:
        sys.stdout.write(report.as_json([unchecked("doctor", subject, message, fix)],
                                        source, server))
    return EXIT_UNCHECKED


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # What could not be read yet, for a report of why the doctor stopped.
    subject, server = "stack outputs", ""
    source = stack.planned_source(args.stack, args.outputs)
    try:
        if (args.stack is None) == (args.outputs is None):
            raise DoctorError("name a STACK or give --outputs FILE.json (one of them)")
        if args.cwd is not None and args.stack is None:
            raise DoctorError("--cwd goes with STACK")
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
    if args.json:
        sys.stdout.write(report.as_json(findings, known.source, snapshot.server))
    else:
        sys.stdout.write(report.table(findings, known.source, snapshot.server, args.all))
    return exit_code(findings)


if __name__ == "__main__":
    sys.exit(main())
