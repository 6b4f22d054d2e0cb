"""Which stacks a change affects, as a GitHub Actions matrix.

    affected_stacks.py --base origin/main --head HEAD   files changed between the two commits
    affected_stacks.py --stack prod                     one stack (a manual run)
    affected_stacks.py --all                            every stack

Prints `stacks=<JSON list>` (every affected stack but prod), `prod=<JSON list>` (prod, or
empty) and `all=<JSON list>`, each item {"stack", "aws", "region"}, for $GITHUB_OUTPUT.
A stack file affects its stack; the program, its dependencies, the policy pack and the
workflows affect every stack; tests, docs and the offline preview affect none.
Standard library only: it runs before any dependency is installed."""

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent.parent
PROTECTED = "prod"
# Paths (prefixes) whose change can change what `pulumi up` does on every stack.
PROGRAM = ("Pulumi.yaml", "__main__.py", "requirements.txt", "components/", "config/",
           "policy/", ".github/workflows/", ".github/scripts/")
_STACK_FILE = re.compile(r"^Pulumi\.(?P<stack>[A-Za-z0-9_.-]+)\.yaml$")
_LAYOUT = re.compile(r"^\s*gpu-cluster:layout:\s*['\"]?(?P<layout>[a-z-]+)", re.M)
_REGION = re.compile(r"^\s+region:\s*['\"]?(?P<region>[a-z]{2}(-[a-z]+)+-\d)", re.M)
_NO_COMMIT = re.compile(r"^0+$")


def stacks(project_dir: Path) -> list:
    return sorted(m["stack"] for p in project_dir.glob("Pulumi.*.yaml")
                  if (m := _STACK_FILE.match(p.name)))


def _in_program(path: str) -> bool:
    return any(path.startswith(p) if p.endswith("/") else path == p for p in PROGRAM)


def affected(changed: list, project_dir: Path) -> list:
    known = stacks(project_dir)
    if any(_in_program(path) for path in changed):
        return known
    named = {m["stack"] for path in changed if (m := _STACK_FILE.match(path))}
    return [stack for stack in known if stack in named]


def describe(stack: str, project_dir: Path) -> dict:
    """What a job needs to know before it runs: AWS credentials or not, and where."""
    text = (project_dir / f"Pulumi.{stack}.yaml").read_text()
    layout = _LAYOUT.search(text)
    region = _REGION.search(text)
    return {"stack": stack, "aws": bool(layout) and layout["layout"] != "bare-metal",
            "region": region["region"] if region else "us-east-1"}


def changed_files(base: str, head: str, project_dir: Path) -> list:
    result = subprocess.run(["git", "diff", "--name-only", "--no-renames", f"{base}...{head}"],
                            cwd=project_dir, capture_output=True, text=True, check=True)
    return [line for line in result.stdout.splitlines() if line]


def outputs(selected: list, project_dir: Path) -> dict:
    items = [describe(stack, project_dir) for stack in selected]
    return {"stacks": [i for i in items if i["stack"] != PROTECTED],
            "prod": [i for i in items if i["stack"] == PROTECTED],
            "all": items}


def main(argv=None, project_dir: Path = PROJECT_DIR) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", help="commit the change starts from")
    parser.add_argument("--head", default="HEAD", help="commit the change ends at")
    parser.add_argument("--stack", help="this stack only")
    parser.add_argument("--all", action="store_true", help="every stack")
    args = parser.parse_args(argv)
    known = stacks(project_dir)
    if args.stack:
        if args.stack not in known:
            print(f"no stack file Pulumi.{args.stack}.yaml", file=sys.stderr)
            return 2
        selected = [args.stack]
    elif args.all or not args.base or _NO_COMMIT.match(args.base):
        # A new branch or a first push has no base to compare with.
        selected = known
    else:
        selected = affected(changed_files(args.base, args.head, project_dir), project_dir)
    for name, value in outputs(selected, project_dir).items():
        print(f"{name}={json.dumps(value, separators=(',', ':'))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
