"""`gpu-cluster distribute` (or `python -m distribute`): write a user's (or the admin's)
kubeconfig to a file, or merge it into an existing kubeconfig, from the stack outputs or from
the user's SSM parameter; with `--vpn`, their OpenVPN profile beside it (hybrid stacks).

Exit codes: 0 done, 1 done with warnings it names (a client certificate the cluster's CA did
not sign), 2 nothing done (wrong command line or input, refused, failed). Messages go to
stderr and never include a kubeconfig; only `--output -` prints one."""

import argparse
import os
import sys
from pathlib import Path
from typing import Optional

from contract import command, names, outputs
from contract.kubeconfig import Handout, dump, parse_handout
from distribute import DistributeError, InputError, demo, files, ssm
from distribute.kubeconfigs import check_credentials, merge, parse_existing
from distribute.vpn import Profile, parse_profile

PROG = "python -m distribute"


def _add_destination(parser: argparse.ArgumentParser) -> None:
    destination = parser.add_argument_group("destination (one of)")
    group = destination.add_mutually_exclusive_group(required=True)
    group.add_argument("--output", metavar="PATH",
                       help="write the kubeconfig to PATH (- for standard output)")
    group.add_argument("--merge-into", metavar="PATH",
                       help="merge it into the kubeconfig at PATH (created when missing), "
                            "keeping every other cluster, user and context")
    destination.add_argument("--force", action="store_true",
                             help="replace a different --output file, or merged entries of "
                                  "the same name that describe another cluster")
    destination.add_argument("--set-current", action="store_true",
                             help="with --merge-into: make the new context the current one")


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0],
                                     epilog=command.EXIT_CODES_DOC)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    write = commands.add_parser(
        "write", help="a kubeconfig from the stack outputs",
        description="Write the admin's or a user's kubeconfig from the stack outputs.")
    who = write.add_mutually_exclusive_group(required=True)
    who.add_argument("--user", metavar="NAME", help="a user of output userKubeconfigs")
    who.add_argument("--admin", action="store_true", help="the admin kubeconfig (output "
                                                          "kubeconfig)")
    command.add_stack(write)
    _add_destination(write)
    write.add_argument("--vpn", action="store_true",
                       help="also write the OpenVPN profile (output userVpnProfiles, or "
                            "vpnAdminProfile with --admin) beside the kubeconfig, as "
                            "<cluster>-<user>.ovpn (hybrid stacks)")
    write.set_defaults(run=run_write)

    fetch = commands.add_parser(
        "fetch", help="your own kubeconfig from its SSM parameter (AWS layouts)",
        description="Fetch your kubeconfig from the SSM SecureString the program stored it "
                    "in, with your own AWS credentials.")
    fetch.add_argument("--user", metavar="NAME", required=True,
                       help="your user name (checked against the kubeconfig)")
    fetch.add_argument("--parameter", metavar="NAME", required=True,
                       help="the SSM parameter (stack output userKubeconfigParameters)")
    fetch.add_argument("--region", metavar="REGION",
                       help="the stack's AWS region (default: AWS_REGION or your profile's)")
    fetch.add_argument("--profile", metavar="PROFILE", help="an AWS CLI profile to use")
    _add_destination(fetch)
    fetch.set_defaults(run=run_fetch)

    users = commands.add_parser(
        "users", help="list the users and their SSM parameters",
        description="List the users of output userKubeconfigs (and their SSM parameters).")
    command.add_stack(users)
    users.set_defaults(run=run_users)

    demo_command = commands.add_parser(
        "demo", help="outputs to try the other commands on, offline",
        description="Write what `pulumi stack output --json --show-secrets` would print for "
                    "an example stack, made by the offline preview with throwaway keys, and "
                    "print the commands to try on it. No cluster, cloud or Pulumi CLI needed.")
    demo_command.add_argument("--outputs", metavar="FILE.json",
                              help=f"where to write them (default: {demo.DEFAULT_FILE} in "
                                   "this project)")
    command.add_stack(demo_command, outputs=False, help_text=(
        f"the example stack (default: {demo.DEFAULT_STACK}, the hybrid one, with VPN "
        "profiles)"))
    demo_command.add_argument("--force", action="store_true",
                              help="make new outputs over those of an earlier demo")
    demo_command.set_defaults(run=run_demo)
    for each in (write, fetch, users, demo_command):
        command.add_json(each)
    return parser


def _outputs(args: argparse.Namespace) -> outputs.StackOutputs:
    command.source(args)
    if args.stack is not None:
        return outputs.from_stack(args.stack, args.cwd or _project_dir())
    return outputs.from_file(args.outputs)


def _project_dir() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _say(message: str, args: Optional[argparse.Namespace] = None) -> None:
    """A message on stderr (stdout carries only `--output -`'s kubeconfig or the JSON
    report), and into the report's notes."""
    print(message, file=sys.stderr)
    if args is not None:
        args.done["notes"].append(message)


def deliver(handout: Handout, args: argparse.Namespace, profile: Optional[Profile] = None
            ) -> int:
    """Writes or merges the kubeconfig as the destination arguments say; the VPN profile,
    when given, beside it."""
    if args.set_current and args.merge_into is None:
        raise InputError("--set-current goes with --merge-into")
    notes = check_credentials(handout)
    described = (f"context '{handout.context_name}' (cluster '{handout.cluster_name}' at "
                 f"{handout.server})")
    if args.output == "-":
        if profile is not None:
            raise InputError("--vpn writes the profile beside the kubeconfig file: give "
                             "--output PATH or --merge-into PATH")
        if args.json == command.STDOUT:
            raise InputError("--output - and --json both print to stdout: give --json "
                             "FILE.json")
        sys.stdout.write(handout.dump())
        sys.stdout.flush()
        args.done["written"].append("-")
        for note in notes:
            _say(note, args)
        return 0
    destination = args.output or args.merge_into
    profile_target = None
    if profile is not None:
        # Beside the kubeconfig as named (a link's folder, not its target's).
        profile_path = Path(destination).expanduser().parent / f"{handout.context_name}.ovpn"
        profile_target = files.inspect(str(profile_path))
        # Refused before anything is written: both files or neither.
        _refuse_other_file(profile_target, profile.text, args.force, "another VPN profile")
    with files.locked(files.inspect(destination).path):
        # Read under the lock: what kubectl may have written meanwhile is kept.
        target = files.inspect(destination)
        if args.output is not None:
            text = handout.dump()
            _refuse_other_file(target, text, args.force, "another kubeconfig",
                               "add the context to it with --merge-into")
            summary = (f"{target.path} already holds {described}" if target.text == text
                       else f"wrote {described} to {target.path}")
        else:
            document = parse_existing(target.text or "", str(target.path))
            result = merge(document, handout, str(target.path), target.path.parent,
                           force=args.force, set_current=args.set_current)
            text = dump(result.document)
            for clash in result.replaced:
                notes.append(f"replaced (--force): {clash}")
            action = "merged" if result.changed else "already up to date:"
            summary = (f"{action} {described} into {target.path}: {', '.join(result.changes)}; "
                       f"current context '{result.current_context}'")
        notes = _write(target, text) + notes
    args.done["written"].append(str(target.path))
    _say(summary + f" (mode {files.FILE_MODE:04o})", args)
    for note in notes:
        _say(note, args)
    if profile is not None:
        _deliver_profile(profile, profile_target, args)
    return 0


def _refuse_other_file(target: files.Target, text: str, force: bool, holds: str,
                       instead: str = "") -> None:
    if target.text is not None and target.text != text and not force:
        raise DistributeError(f"{target.path} exists and holds {holds}: rerun with --force "
                              f"to replace it{', or ' + instead if instead else ''}")


def _write(target: files.Target, text: str) -> list[str]:
    notes = []
    if target.text != text or target.mode != files.FILE_MODE:
        notes = files.write_private(target, text)
    if target.link is not None:
        notes.append(f"{target.link} is a link to {target.path}, written there")
    return notes


def _deliver_profile(profile: Profile, target: files.Target, args: argparse.Namespace) -> None:
    described = f"VPN profile '{profile.common_name}' (server {profile.remote})"
    summary = (f"{target.path} already holds {described}" if target.text == profile.text
               else f"wrote {described} to {target.path}")
    notes = _write(target, profile.text)
    args.done["written"].append(str(target.path))
    _say(summary + f" (mode {files.FILE_MODE:04o}); connect with: "
                   f"sudo openvpn --config {target.path}", args)
    for note in notes + profile.notes:
        _say(note, args)


def run_write(args: argparse.Namespace) -> int:
    stack_outputs = _outputs(args)
    source = stack_outputs.source
    if args.admin:
        text = stack_outputs.admin_kubeconfig()
        what = f"output '{names.ADMIN_KUBECONFIG_OUTPUT}' of {source}"
    else:
        text = stack_outputs.user_kubeconfig(args.user)
        what = f"user '{args.user}' of output '{names.USER_KUBECONFIGS_OUTPUT}' of {source}"
    handout = parse_handout(text, what)
    profile = None
    if args.vpn:
        if args.admin:
            profile = parse_profile(stack_outputs.admin_vpn_profile(),
                                    f"output '{names.ADMIN_VPN_PROFILE_OUTPUT}' of {source}")
        else:
            profile = parse_profile(stack_outputs.user_vpn_profile(args.user),
                                    f"user '{args.user}' of output "
                                    f"'{names.USER_VPN_PROFILES_OUTPUT}' of {source}")
    return deliver(handout, args, profile)


def run_fetch(args: argparse.Namespace) -> int:
    text = ssm.fetch_parameter(args.parameter, args.region, args.profile)
    handout = parse_handout(text, f"SSM parameter '{args.parameter}'")
    expected = f"{handout.cluster_name}-{args.user}"
    if handout.context_name != expected:
        raise InputError(f"SSM parameter '{args.parameter}' holds context "
                         f"'{handout.context_name}', not '{expected}' of user '{args.user}': "
                         "check --parameter")
    return deliver(handout, args)


def run_users(args: argparse.Namespace) -> int:
    stack_outputs = _outputs(args)
    parameters = stack_outputs.parameters()
    listed = sorted(stack_outputs.users())
    command.say(args, "".join(f"{user}\t{parameters[user]}\n" if user in parameters
                              else f"{user}\n" for user in listed))
    args.done["users"] = [{"name": user, "parameter": parameters.get(user)} for user in listed]
    return 0


def run_demo(args: argparse.Namespace) -> int:
    project = Path(_project_dir())
    path, notes = demo.write(project, args.outputs or str(project / demo.DEFAULT_FILE),
                             command.stack_argument(args) or demo.DEFAULT_STACK, args.force)
    args.done["written"].append(str(path))
    for note in notes:
        _say(note, args)
    _say("try (offline; files beside the outputs):")
    for step in demo.next_steps(path):
        _say(f"  {step}", args)
    return 0


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    args = build_parser(prog).parse_args(argv)
    args.done = {"written": [], "notes": []}
    try:
        args.run(args)
        warned = any(note.startswith("warning:") for note in args.done["notes"])
        code = command.EXIT_PROBLEMS if warned else command.EXIT_OK
    except DistributeError as error:
        code = _failed(args, str(error))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return command.EXIT_NOTHING_DONE
    except Exception as error:  # noqa: BLE001 - one line, never a traceback with secrets
        if os.environ.get("DISTRIBUTE_DEBUG"):
            raise
        code = _failed(args, f"unexpected {type(error).__name__}; DISTRIBUTE_DEBUG=1 shows "
                             "where")
    command.write_json(args, {"command": f"distribute {args.command}", "exitCode": code,
                              **args.done})
    return code


def _failed(args: argparse.Namespace, message: str) -> int:
    """Nothing done (every file is written whole or not at all, the kubeconfig before its
    VPN profile only once both were checked): the reason, also in the report."""
    _say(f"error: {message}")
    args.done["error"] = message
    return command.EXIT_NOTHING_DONE


if __name__ == "__main__":
    sys.exit(main())
