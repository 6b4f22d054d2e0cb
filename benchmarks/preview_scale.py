"""Offline preview of synthetic stacks beside the SDK floor (the same number of bare
resources registered under the same mocks): bare-metal stacks at 10, 100 and the most
hosts a stack may hold (config.loader.MAX_HOSTS), and a cloud stack with the most pools.

Goals: the largest stack the config allows previews within GOAL_SECONDS and GOAL_PEAK_MIB
on a 2-core machine, as every pull request previews every stack; the limits are chosen
from these figures.

Each measurement runs in its own process so peak memory (max RSS) is its own.
Usage: python benchmarks/preview_scale.py [--workers 10 100 499] [--pools 200] [--repeat 3]
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

from config.loader import MAX_HOSTS, MAX_POOLS  # noqa: E402

GOAL_SECONDS = 30
GOAL_PEAK_MIB = 1024


def measure_stack(workers: int) -> dict:
    from preview.engine import run_program
    from tests.conftest import as_cli_config, bare_metal_config

    # Imported before the clock starts (the floor imports no provider SDK either).
    import components.cluster  # noqa: F401

    stack = as_cli_config(bare_metal_config(workers=workers), stack=f"bench{workers}")
    return _timed(lambda: run_program(PROJECT_DIR, stack))


def measure_pools(pools: int) -> dict:
    """A cloud stack with `pools` GPU pools."""
    from preview.engine import run_program
    from tests.conftest import as_cli_config, cloud_config

    import components.cluster  # noqa: F401

    values = cloud_config()
    values["pools"] = [{"name": f"pool{i}", "instanceType": "g5.12xlarge", "count": 2,
                        "gpus": 4} for i in range(pools)]
    stack = as_cli_config(values, stack=f"pools{pools}")
    return _timed(lambda: run_program(PROJECT_DIR, stack))


def measure_floor(count: int) -> dict:
    """`count` bare custom resources, no dependencies, through the same recording mocks."""
    import pulumi

    from preview.engine import run_program
    from preview.stack_file import StackConfigFile

    def program() -> None:
        for index in range(count):
            pulumi.CustomResource("bench:index:Bare", f"r{index}", {"value": str(index)})

    stack = StackConfigFile(project="gpu-cluster", stack="floor", config={}, secret_keys=[])
    return _timed(lambda: run_program(PROJECT_DIR, stack, program=program))


def _timed(run) -> dict:
    start = time.perf_counter()
    plan = run()
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "resources": len(plan.resources), "depth": plan.depth}


_MEASURES = {"stack": measure_stack, "pools": measure_pools, "floor": measure_floor}


def child(kind: str, size: int) -> None:
    result = _MEASURES[kind](size)
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
    # Workers beside the controller: MAX_HOSTS - 1 is the largest stack allowed.
    parser.add_argument("--workers", type=int, nargs="+", default=[10, 100, MAX_HOSTS - 1])
    parser.add_argument("--pools", type=int, nargs="*", default=[MAX_POOLS])
    parser.add_argument("--repeat", type=int, default=3, help="runs per size; the best is shown")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "SIZE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return

    header = (f"{'stack':>12} {'resources':>9} {'depth':>5} {'wall s':>8} {'peak MiB':>9}"
              f" | {'floor s':>8} {'floor MiB':>9} {'x floor':>7} | goals")
    print(header)
    print("-" * len(header))
    sizes = [("stack", f"{w + 1} hosts", w) for w in args.workers]
    sizes += [("pools", f"{p} pools", p) for p in args.pools]
    for kind, label, size in sizes:
        stack = min((run_child(kind, size) for _ in range(args.repeat)),
                    key=lambda r: r["seconds"])
        floor = min((run_child("floor", stack["resources"]) for _ in range(args.repeat)),
                    key=lambda r: r["seconds"])
        within = stack["seconds"] <= GOAL_SECONDS and stack["peak_rss_mib"] <= GOAL_PEAK_MIB
        print(f"{label:>12} {stack['resources']:>9} {stack['depth']:>5} {stack['seconds']:>8.2f}"
              f" {stack['peak_rss_mib']:>9.0f} | {floor['seconds']:>8.2f}"
              f" {floor['peak_rss_mib']:>9.0f} {stack['seconds'] / floor['seconds']:>7.1f}"
              f" | {'met' if within else 'MISSED'}")
    print(f"\nGoals: {GOAL_SECONDS} s and {GOAL_PEAK_MIB} MiB for the largest stack allowed "
          f"({MAX_HOSTS} hosts, {MAX_POOLS} pools).")


if __name__ == "__main__":
    main()
