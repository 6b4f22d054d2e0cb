"""gpu-cluster: the project's command (`venv/bin/gpu-cluster`, or `python -m cli`).

Every subcommand takes the stack first (`gpu-cluster doctor prod`), writes its JSON report
with `--json` (to stdout, the human text then on stderr) or `--json FILE.json`, and exits
0 done, nothing to report; 1 done, with problems it names; 2 nothing done (bad usage,
nothing could be read or checked): docs/running.md#exit-codes."""

import argparse
import sys
from concurrent.futures import ThreadPoolExecutor
from ipaddress import IPv4Network
from pathlib import Path

from cli import init_hybrid
from cli.discover import SshOptions, Unreachable, discover
from cli.init_stack import InitChoices, write_stack
from contract import command

PROJECT_DIR = Path(__file__).resolve().parent.parent
# Hosts read at once: each is one ssh client waiting on its host.
PARALLEL_READS = 16


# The tools' own entry functions under `gpu-cluster NAME` (their parsers, their --help); each
# imported only when its subcommand runs, so `gpu-cluster doctor` never loads the Pulumi SDK.
def _preview(argv: list) -> int:
    from preview.__main__ import main
    return main(argv, prog="gpu-cluster preview")


def _policy(argv: list) -> int:
    from policy.offline import main
    return main(argv, prog="gpu-cluster policy")


def _doctor(argv: list) -> int:
    from doctor.__main__ import main
    return main(argv, prog="gpu-cluster doctor")


def _validate(argv: list) -> int:
    from validate.__main__ import main
    return main(argv, prog="gpu-cluster validate")


def _distribute(argv: list) -> int:
    from distribute.__main__ import main
    return main(argv, prog="gpu-cluster distribute")


TOOLS = {
    "preview": (_preview, "offline preview of STACK into build/STACK/ (no cloud, no CLI)"),
    "policy": (_policy, "the policy pack's rules over the offline preview of each STACK"),
    "doctor": (_doctor, "read-only checks of STACK's running cluster, each with its fix"),
    "validate": (_validate, "workloads on STACK's built cluster: GPUs, NCCL, storage"),
    "distribute": (_distribute, "hand out kubeconfigs and VPN profiles from STACK's outputs"),
}


def _read(addresses: list, options: SshOptions) -> dict:
    """address -> HostFacts, or why it could not be read; the hosts side by side."""
    for address in addresses:
        print(f"reading {address} ...", file=sys.stderr)

    def one(address):
        try:
            return discover(address, options)
        except Unreachable as error:
            return str(error)
    with ThreadPoolExecutor(max_workers=min(PARALLEL_READS, len(addresses))) as pool:
        return dict(zip(addresses, pool.map(one, addresses)))


def _init(args) -> int:
    target = Path(args.output) if args.output else PROJECT_DIR / f"Pulumi.{args.stack}.yaml"
    document = {"command": "init", "stack": args.stack, "file": str(target)}
    if target.exists() and not args.force:
        return _nothing_done(args, document, f"{target} exists; --force replaces it")
    if args.layout == "hybrid" and args.controller:
        return _nothing_done(args, document, "--controller: the hybrid layout's control plane "
                                             "runs on EC2, every host here is a worker")
    options = SshOptions(user=args.user, port=args.port, bastion=args.bastion,
                         private_key=Path(args.key) if args.key else None)
    results = _read(args.hosts, options)
    document["unreached"] = {a: r for a, r in results.items() if isinstance(r, str)}
    if len(document["unreached"]) == len(results):
        for address, reason in results.items():
            print(f"{address}: not reached: {reason}", file=sys.stderr)
        return _nothing_done(args, document, "no host could be read; nothing written")
    written = write_stack(results, InitChoices(
        stack=args.stack, user=args.user, port=args.port, bastion=args.bastion,
        controller=args.controller, lan=args.lan, layout=args.layout,
        hybrid=init_hybrid.HybridChoices.of(args)))
    target.write_text(written.text)
    code = command.EXIT_PROBLEMS if written.notes else command.EXIT_OK
    command.report(args, f"wrote {target}\n"
                   + "".join(f"  to decide: {note}\n" for note in written.notes)
                   + f"next: read it, then `gpu-cluster preview {args.stack}`\n",
                   {**document, "exitCode": code, "toDecide": written.notes,
                    "hosts": sorted(r.hostname for r in results.values()
                                    if not isinstance(r, str))})
    return code


def _nothing_done(args, document: dict, message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    command.write_json(args, {**document, "exitCode": command.EXIT_NOTHING_DONE,
                              "error": message})
    return command.EXIT_NOTHING_DONE


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="gpu-cluster", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = root.add_subparsers(dest="command", required=True, metavar="COMMAND")
    init = commands.add_parser(
        "init", help="write a starter stack from what the hosts report over SSH",
        description="Connects read-only to each host (no root; `sudo -n true` is tried) and "
                    "writes Pulumi.STACK.yaml: names, addresses, NICs, GPUs, host keys; with "
                    "--layout hybrid, the AWS side too, each value you did not give named.",
        epilog=command.EXIT_CODES_DOC)
    init.add_argument("stack", metavar="STACK",
                      help="the stack's name (writes Pulumi.STACK.yaml)")
    init.add_argument("hosts", nargs="+", metavar="[USER@]ADDRESS[:PORT]",
                      help="where SSH reaches each host (USER: when not --user)")
    init.add_argument("--user", required=True, help="the SSH login user (passwordless sudo)")
    init.add_argument("--port", type=int, default=22, help="the hosts' SSH port")
    init.add_argument("--key", help="the SSH private key file (default: ssh's own)")
    init.add_argument("--bastion", metavar="HOST[:PORT]", help="an SSH jump host")
    init.add_argument("--controller", metavar="ADDRESS|NAME",
                      help="the host that runs the control plane")
    init.add_argument("--lan", type=IPv4Network, metavar="CIDR",
                      help="the network the cluster's hosts share, when a host has several")
    init.add_argument("--layout", choices=("bare-metal", "hybrid"), default="bare-metal",
                      help="bare-metal (default): a controller among the hosts; hybrid: the "
                           "control plane on EC2, the hosts its workers")
    init.add_argument("--output", help="write here instead of Pulumi.STACK.yaml")
    init.add_argument("--force", action="store_true", help="replace an existing file")
    command.add_json(init)
    init_hybrid.add_arguments(init)
    init.set_defaults(run=_init)
    for name, (_, help_text) in TOOLS.items():
        # Listed for --help; `main` hands the words after NAME to the tool's own parser.
        commands.add_parser(name, help=help_text, add_help=False)
    return root


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in TOOLS:
        return TOOLS[argv[0]][0](argv[1:])
    args = parser().parse_args(argv)
    return args.run(args)


def run() -> None:
    """The console script. After a preview, the preview's own exit (preview.__main__
    exit_now: no interpreter teardown of the provider SDKs)."""
    code = main()
    preview = sys.modules.get("preview.__main__")
    (preview.exit_now if preview is not None else sys.exit)(code)


if __name__ == "__main__":
    run()
