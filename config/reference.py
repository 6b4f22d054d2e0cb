"""Writes the files generated from the config model: docs/config-reference.md (every key,
its type, default and description, from the pydantic fields) and Pulumi.yaml's `config:`
block. `--check` writes nothing and exits 1 naming each file that is stale.

    python -m config.reference [--check] [--root DIR]      (make docs)
"""

import argparse
import sys
import typing
from pathlib import Path

from config.project_file import project_file
from config.reference_tables import Table, named_types_used, tables

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = "docs/config-reference.md"
PROJECT = "Pulumi.yaml"

_INTRO = """\
# Config keys

<!-- Generated from config/model.py by `python -m config.reference` (make docs): edit the
docstrings under the pydantic fields, not this file. tests/config/test_reference.py fails when it
is stale. -->

Every key of a stack file's `gpu-cluster:` namespace, in the model's order, one table per
section. How keys are written, the rules every value follows, the limits and the secrets:
[reference.md](reference.md).

- **type**: a name like `DnsLabel` is a constrained string, checked whole by its validator
  (*Types*, at the end); `a`, `b` or `c` are the allowed values; **secret** keys are set with
  `pulumi config set --secret` and never shown.
- **default**: as YAML; *required*: the key must be set (within its section, when the
  section is set); *unset*: the key is left out, and its description says what that means.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(table: Table) -> str:
    lines = [f"## {table.title}", ""]
    if table.description:
        lines += [table.description, ""]
    lines += ["| key | type | default | description |", "| --- | --- | --- | --- |"]
    lines += [f"| `{key}` | {_cell(kind)} | {_cell(default)} | {_cell(description)} |"
              for key, kind, default, description in table.rows]
    return "\n".join(lines) + "\n"


def _types_table(found: list[tuple[str, str, str]]) -> str:
    lines = ["## Types", "",
             "The constrained values the tables name, each checked whole by its validator.", "",
             "| type | base | module | checked by |", "| --- | --- | --- | --- |"]
    lines += [f"| `{name}` | {base} | `{module}` | {_cell(check)} |"
              for name, base, module, check in found]
    return "\n".join(lines) + "\n"


def reference() -> str:
    """docs/config-reference.md."""
    found = tables()
    return "\n".join([_INTRO, *(_table(t) for t in found), _types_table(named_types_used())])


def generated(root: Path = ROOT) -> dict[str, str]:
    """Each generated file (relative path) and the text it must have."""
    project = (root / PROJECT).read_text()
    return {REFERENCE: reference(), PROJECT: project_file(project)}


def stale(root: Path = ROOT) -> list[str]:
    """The generated files whose committed text differs from the generator's."""
    return [path for path, text in generated(root).items()
            if not (root / path).exists() or (root / path).read_text() != text]


def main(argv: typing.Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m config.reference", description=__doc__)
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 naming each stale file")
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.check:
        old = stale(args.root)
        for path in old:
            print(f"{path} is stale: run `python -m config.reference` (make docs) and commit "
                  "it", file=sys.stderr)
        return 1 if old else 0
    for path, text in generated(args.root).items():
        target = args.root / path
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
