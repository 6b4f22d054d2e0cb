"""Byte-compiles what the program and the offline preview import, once, at set-up (the
Makefile runs `python -m preview.bytecode` after installing the requirements).

pip installs the program's requirements without compiling them (--no-compile: pulumi-aws
alone is 3,141 modules and a stack imports few of them), and where PYTHONDONTWRITEBYTECODE
is set, as in many container images, Python never writes what an import compiled: every
preview compiled pulumi, pulumi-kubernetes and the AWS modules it uses again (prod: 5.3 to
5.8 s instead of 2.5 to 3.0 s). So every example stack is previewed here once, in this
process, as `python -m preview` does (into a throwaway folder), and then every module
loaded is compiled: the ones the program and the preview use, and no others."""

import contextlib
import os
import py_compile
import sys
import tempfile
from pathlib import Path


def main() -> None:
    from preview.__main__ import main as preview
    from preview.stack_file import EXAMPLE_STACKS

    with tempfile.TemporaryDirectory() as build, open(os.devnull, "w") as quiet:
        for stack in EXAMPLE_STACKS:
            # What it is at, on the terminal: the first run is otherwise a minute of silence.
            print(f"  previewing {stack} once to find what it imports", file=sys.stderr,
                  flush=True)
            with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
                status = preview([stack, "--build-dir", build, "--quiet"])
            if status != 0:
                sys.exit(f"preview.bytecode: the offline preview of {stack} failed; "
                         f"`python -m preview {stack}` says why")
    for module in list(sys.modules.values()):
        spec = getattr(module, "__spec__", None)
        source, cached = getattr(spec, "origin", None), getattr(spec, "cached", None)
        if source and cached and source.endswith(".py") and not Path(cached).exists():
            py_compile.compile(source, cfile=cached, doraise=True)


if __name__ == "__main__":
    main()
