"""gpu-cluster: the project's command. `python -m cli SUBCOMMAND`.

Exit codes, the same for every subcommand: 0 done and nothing to report; 1 done, with
problems it names (a check failed, a value left for you to decide); 2 nothing done (bad
usage, nothing could be read)."""

import argparse
import sys
from ipaddress import IPv4Network
from pathlib import Path

from cli.discover import SshOptions, Unreachable, discover
from cli.init_stack import InitChoices, write_stack

PROJECT_DIR = Path(__file__).resolve().parent.parent


def _init(args) -> int:
    target = Path(args.output) if args.output else PROJECT_DIR / f"Pulumi.{args.stack}.yaml"
    if target.exists() and not args.force:
        print(f"error: {target} exists; --force replaces it", file=sys.stderr)
        return 2
    options = SshOptions(user=args.user, port=args.port, bastion=args.bastion,
                         private_key=Path(args.key) if args.key else None)
    results = {}
    for address in args.hosts:
        print(f"reading {address} ...", file=sys.stderr)
        try:
            results[address] = discover(address, options)
        except Unreachable as error:
            results[address] = str(error)
    if not any(not isinstance(r, str) for r in results.values()):
        for address, reason in results.items():
            print(f"{address}: not reached: {reason}", file=sys.stderr)
        print("error: no host could be read; nothing written", file=sys.stderr)
        return 2
    written = write_stack(results, InitChoices(
        stack=args.stack, user=args.user, port=args.port, bastion=args.bastion,
        controller=args.controller, lan=args.lan))
    target.write_text(written.text)
    print(f"wrote {target}")
    for note in written.notes:
        print(f"  to decide: {note}")
    print(f"next: read it, then `make preview STACK={args.stack}`")
    return 1 if written.notes else 0


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="gpu-cluster", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = root.add_subparsers(dest="command", required=True)
    init = commands.add_parser(
        "init", help="write a starter bare-metal stack from what the hosts report over SSH",
        description="Connects read-only to each host (no root; `sudo -n true` is tried) and "
                    "writes Pulumi.STACK.yaml: names, addresses, NICs, GPUs, host keys.")
    init.add_argument("stack", help="the stack's name (writes Pulumi.STACK.yaml)")
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
    init.add_argument("--output", help="write here instead of Pulumi.STACK.yaml")
    init.add_argument("--force", action="store_true", help="replace an existing file")
    init.set_defaults(run=_init)
    return root


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
