"""Offline preview of synthetic bare-metal stacks at 10, 100 and 500 workers, beside the
SDK floor: the same number of bare resources registered under the same mocks.

Each measurement runs in its own process so peak memory (max RSS) is its own.
Usage: python benchmarks/preview_scale.py [--workers 10 100 500] [--repeat 3]
"""

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_DIR))


def measure_stack(workers: int) -> dict:
    from preview.engine import run_program
    from tests.conftest import as_cli_config, bare_metal_config

    # Imported before the clock starts (the floor imports no provider SDK either).
    import components.cluster  # noqa: F401

    stack = as_cli_config(bare_metal_config(workers=workers), stack=f"bench{workers}")
    start = time.perf_counter()
    plan = run_program(PROJECT_DIR, stack)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "resources": len(plan.resources), "depth": plan.depth}


def measure_floor(count: int) -> dict:
    """`count` bare custom resources, no dependencies, through the same recording mocks."""
    import pulumi

    from preview.engine import run_program
    from preview.stack_file import StackConfigFile

    def program() -> None:
        for index in range(count):
            pulumi.CustomResource("bench:index:Bare", f"r{index}", {"value": str(index)})

    stack = StackConfigFile(project="gpu-cluster", stack="floor", config={}, secret_keys=[])
    start = time.perf_counter()
    plan = run_program(PROJECT_DIR, stack, program=program)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "resources": len(plan.resources), "depth": plan.depth}


def child(kind: str, size: int) -> None:
    result = measure_stack(size) if kind == "stack" else measure_floor(size)
    result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def run_child(kind: str, size: int) -> dict:
    output = subprocess.run(
        [sys.executable, __file__, "--child", kind, str(size)],
        check=True, capture_output=True, text=True, cwd=PROJECT_DIR,
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[10, 100, 500])
    parser.add_argument("--repeat", type=int, default=3, help="runs per size; the best is shown")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "SIZE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return

    header = (f"{'workers':>7} {'resources':>9} {'depth':>5} {'wall s':>8} {'peak MiB':>9}"
              f" | {'floor s':>8} {'floor MiB':>9} {'x floor':>7}")
    print(header)
    print("-" * len(header))
    for workers in args.workers:
        stack = min((run_child("stack", workers) for _ in range(args.repeat)),
                    key=lambda r: r["seconds"])
        floor = min((run_child("floor", stack["resources"]) for _ in range(args.repeat)),
                    key=lambda r: r["seconds"])
        print(f"{workers:>7} {stack['resources']:>9} {stack['depth']:>5} {stack['seconds']:>8.2f}"
              f" {stack['peak_rss_mib']:>9.0f} | {floor['seconds']:>8.2f}"
              f" {floor['peak_rss_mib']:>9.0f} {stack['seconds'] / floor['seconds']:>7.1f}")


if __name__ == "__main__":
    main()
