"""Offline preview: `python -m preview [STACK]`.

Runs the program for a stack under the Pulumi SDK's mocks (no CLI, no cloud, no
cluster), prints the plan and writes the rendered artifacts to build/<stack>/."""

import argparse
import contextlib
import logging
import os
import sys
from pathlib import Path

import acceptance
from config import ConfigError, load
from preview import entropy
from preview.engine import run_program
from preview.images import images_txt
from preview.report import quiet_report, tree, write_artifacts
from preview.stack_file import StackFileError, read_stack, stack_name

PROJECT_DIR = Path(__file__).resolve().parent.parent
DEFAULT_STACK = "prod"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m preview", description=__doc__.split("\n")[0])
    parser.add_argument("stack", nargs="?", default=DEFAULT_STACK,
                        help=f"stack to preview, reads Pulumi.<stack>.yaml; its name or that file "
                        f"(default: {DEFAULT_STACK})")
    parser.add_argument("--build-dir", type=Path, default=PROJECT_DIR / "build",
                        help="where build/<stack>/ is written (default: ./build)")
    parser.add_argument("--quiet", action="store_true", help="print only the summary")
    parser.add_argument("--seed", help="draw the throwaway keys, tokens and certificates from "
                        "this text instead of the OS, so runs can be compared byte for byte")
    args = parser.parse_args(argv)

    try:
        args.stack = stack_name(args.stack, PROJECT_DIR)
        with entropy.reproducible(args.seed) if args.seed else contextlib.nullcontext():
            stack_file = read_stack(PROJECT_DIR, args.stack)
            plan = run_program(PROJECT_DIR, stack_file)
    except (FileNotFoundError, StackFileError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except ConfigError as error:
        print(f"Stack '{args.stack}': {error}", file=sys.stderr)
        return 1

    report = tree(plan)
    out_dir = args.build_dir / args.stack
    settings = load(stack_file.config, stack_file.secret_keys, stack=args.stack)
    checks = {f"acceptance/{name}": acceptance.dump(objects)
              for name, objects in acceptance.render(settings).items()}
    checks["images.txt"] = images_txt(plan, settings, checks)
    written = write_artifacts(plan, out_dir, checks)
    print(quiet_report(plan) if args.quiet else report, end="")
    print(f"\nWrote {len(written)} files to {out_dir}")
    return 0


def exit_now(code: int) -> None:
    """Ends the process without the interpreter's teardown, which frees the provider SDKs'
    modules and the plan object by object (about 0.45 s of a 2.6 s prod preview). Safe
    here: every artifact is written and closed (report.write_artifacts) and no thread is
    still working; output is flushed first, and on a flush error (a closed pipe) the
    ordinary exit reports it."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        sys.exit(code)
    logging.shutdown()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
