"""The command-line convention every `gpu-cluster` subcommand follows, written once (the
tools import it; `python -m TOOL` and `gpu-cluster TOOL` are the same parser):

- the stack is positional (`STACK`), or `--outputs FILE.json` where a tool reads the stack's
  outputs (`--stack NAME` is still accepted, with a deprecation line on stderr);
- `--json` writes the JSON report to stdout and the human text to stderr; `--json FILE`
  writes it to FILE and the human text to stdout; without it, only the human text;
- the exit codes below (docs/running.md#exit-codes is their one table).

Standard library only, like names.py and ports.py."""

import argparse
import json
import os
import sys
from typing import Optional

from contract import InputError

# 0: done, nothing to report. 1: done, with problems it names. 2: nothing done (bad usage,
# nothing could be read or checked); argparse's usage errors exit 2 as well.
EXIT_OK, EXIT_PROBLEMS, EXIT_NOTHING_DONE = 0, 1, 2
EXIT_CODES_DOC = "exit codes: 0 done, 1 done with problems it names, 2 nothing done " \
                 "(docs/running.md#exit-codes)"
STDOUT = "-"


def exit_code(problems: bool, unchecked: bool) -> int:
    """A problem found outranks what could not be checked: the user acts on it first."""
    return EXIT_PROBLEMS if problems else EXIT_NOTHING_DONE if unchecked else EXIT_OK


def add_stack(parser: argparse.ArgumentParser, outputs: bool = True, help_text: str = "") -> None:
    """STACK positional; with `outputs`, `--outputs FILE.json` and `--cwd DIR` besides (one
    of STACK and --outputs: source() checks it)."""
    parser.add_argument("stack", nargs="?", metavar="STACK", help=help_text or (
        "the stack: its outputs read with `pulumi stack output --json --show-secrets`"))
    parser.add_argument("--stack", dest="stack_option", metavar="NAME", help=argparse.SUPPRESS)
    if outputs:
        parser.add_argument("--outputs", metavar="FILE.json",
                            help="a JSON export of `pulumi stack output --json --show-secrets` "
                                 "instead of STACK (- for standard input)")
        parser.add_argument("--cwd", metavar="DIR",
                            help="with STACK: the Pulumi project folder (default: this project)")


def _json_target(value: str) -> str:
    # `--json STACK` would otherwise take the stack for the file: a FILE ends in .json.
    if value != STDOUT and not value.endswith(".json"):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a FILE.json; give STACK before --json, or --json FILE.json")
    # Refused before anything runs, rather than a report lost at the end.
    folder = os.path.dirname(os.path.abspath(value))
    if value != STDOUT and not (os.path.isdir(folder) and os.access(folder, os.W_OK)):
        raise argparse.ArgumentTypeError(f"{value}: its folder is missing or not writable")
    return value


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", nargs="?", const=STDOUT, type=_json_target,
                        metavar="FILE.json",
                        help="the JSON report: to stdout (the human text then goes to "
                             "stderr), or to FILE.json")


def stack_argument(args: argparse.Namespace) -> Optional[str]:
    """The stack, from STACK or the deprecated --stack (which says so on stderr)."""
    old = getattr(args, "stack_option", None)
    if old is not None:
        print("warning: --stack NAME is deprecated: give the stack as the first argument "
              f"(STACK {old})", file=sys.stderr)
        if args.stack not in (None, old):
            raise InputError(f"two stacks named: {args.stack} and --stack {old}")
        args.stack = old
    return args.stack


def source(args: argparse.Namespace) -> None:
    """Checks that exactly one of STACK and --outputs is given; InputError otherwise."""
    stack = stack_argument(args)
    if (stack is None) == (args.outputs is None):
        raise InputError("name a STACK or give --outputs FILE.json (one of them)")
    if args.cwd is not None and stack is None:
        raise InputError("--cwd goes with STACK")


def human_stream(args: argparse.Namespace):
    """Where the human text goes: stderr when stdout carries the JSON report."""
    return sys.stderr if getattr(args, "json", None) == STDOUT else sys.stdout


def say(args: argparse.Namespace, text: str) -> None:
    stream = human_stream(args)
    stream.write(text)
    stream.flush()


def write_json(args: argparse.Namespace, document) -> None:
    """The JSON report where --json says (nothing without it). A document given as text is
    written as it is (a tool's own serialiser)."""
    target = getattr(args, "json", None)
    if target is None:
        return
    text = document if isinstance(document, str) else json.dumps(document, indent=2) + "\n"
    if target == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    # Written whole or not at all: a reader never sees half a report.
    partial = f"{target}.partial"
    with open(partial, "w") as handle:
        handle.write(text)
    os.replace(partial, target)


def report(args: argparse.Namespace, human: str, document) -> None:
    """The human text and the JSON report, each where the convention puts it."""
    say(args, human)
    write_json(args, document)
