"""Offline preview of synthetic bare-metal stacks beside the SDK floor: the same number of
bare resources registered under the same mocks, measured in the same run, alternately
(stack, floor, stack, floor, ...), so load on the machine falls on both.

Sizes above the config's limit (config.loader.MAX_HOSTS) are measured with the limit
raised in the measuring process only: they show how the preview scales, which is what
the limit was chosen from. `--full` adds the build folder (write_artifacts), as
`python -m preview` writes it.

Beside them, the replay: the stack's own graph registered bare, each recorded resource as
a plain one with the same inputs, parent and dependencies. The stack against the replay is
what the program itself adds (its Outputs, components, rendering); the replay against the
floor is what the graph's data and edges cost the SDK whatever program makes them. (The
replay holds the recorded inputs before its clock starts, so its memory is not compared.)

Beside the floor, the typed floor: as many `remote.Command`s (the type of most of the
stack's resources) with the fewest inputs one can run, no parent and no dependency. What
a resource type costs the SDK (an Output per output property, a stack trace per resource:
pulumi sdk/python/lib/pulumi/runtime/resource.py, _get_stack_trace, which skips a bare
CustomResource) is in it; the stack against it is what the program and its graph add.

Each measurement runs in its own process, so its CPU time and peak memory (max RSS) are
its own; the median of `--repeat` runs is shown.
Usage: python benchmarks/preview_scale.py [--workers 10 100 499 1000 10000] [--pools 200]
       [--repeat 3] [--full]
"""

import argparse
import gc
import importlib
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_DIR))

from config.loader import MAX_HOSTS, MAX_POOLS  # noqa: E402
from contract.names import POOL_LABEL  # noqa: E402

# At the most hosts a stack may hold: time and memory against the floor's.
GOAL_RATIO = 2.0
GOAL_MEMORY_RATIO = 1.5


def _bare_metal_stack(workers: int):
    import config.loader
    from tests.builders import as_cli_config, bare_metal_config

    # Imported before the clock starts (the floor imports no provider SDK either).
    importlib.import_module("components.cluster")

    config.loader.MAX_HOSTS = max(MAX_HOSTS, workers + 1)
    return as_cli_config(bare_metal_config(workers=workers), stack=f"bench{workers}")


def measure_stack(workers: int, full: bool) -> dict:
    from preview.engine import run_program

    stack = _bare_metal_stack(workers)
    return _timed(lambda: run_program(PROJECT_DIR, stack), full)


def measure_replay(workers: int, full: bool) -> dict:
    """The stack's plan, made before the clock starts, registered again bare."""
    import pulumi

    from preview.engine import run_program

    plan = run_program(PROJECT_DIR, _bare_metal_stack(workers))
    records = [(r.urn, r.custom, r.parent, r.dependencies, _plain(r.inputs))
               for r in plan.resources]
    del plan
    gc.collect()

    def program() -> None:
        made: dict = {}
        for index, (urn, custom, parent, dependencies, inputs) in enumerate(records):
            opts = pulumi.ResourceOptions(parent=made.get(parent),
                                          depends_on=[made[urn] for urn in dependencies])
            made[urn] = (pulumi.CustomResource("bench:index:Replay", f"r{index}", inputs, opts)
                         if custom else
                         pulumi.ComponentResource("bench:index:Group", f"c{index}", None, opts))

    return _timed_program("replay", program, full)


def _plain(value):
    """A recorded input as a program would pass it: secrets as their values, and what only
    `pulumi up` knows as nothing."""
    from pulumi.output import Unknown
    from pulumi.runtime import rpc

    value = rpc.unwrap_rpc_secret(value)
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return None if isinstance(value, Unknown) else value


def measure_pools(pools: int, full: bool) -> dict:
    """A cloud stack with `pools` GPU pools."""
    import config.loader
    from preview.engine import run_program
    from tests.builders import as_cli_config, cloud_config

    importlib.import_module("components.cluster")

    config.loader.MAX_POOLS = max(MAX_POOLS, pools)
    values = cloud_config()
    values["pools"] = [{"name": f"pool{i}", "instanceType": "g5.12xlarge", "count": 2,
                        "gpus": 4} for i in range(pools)]
    stack = as_cli_config(values, stack=f"pools{pools}")
    return _timed(lambda: run_program(PROJECT_DIR, stack), full)


def measure_floor(count: int, full: bool) -> dict:
    """`count` bare custom resources, no dependencies, through the same recording mocks."""
    import pulumi

    def program() -> None:
        for index in range(count):
            pulumi.CustomResource("bench:index:Bare", f"r{index}", {"value": str(index)})

    return _timed_program("floor", program, full)


def measure_typed_floor(count: int, full: bool) -> dict:
    """`count` remote.Commands with the fewest inputs one runs with, no dependencies."""
    import pulumi
    from pulumi_command import remote

    def program() -> None:
        key = pulumi.Output.secret("key")
        for index in range(count):
            remote.Command(f"r{index}", create="true", connection=remote.ConnectionArgs(
                host="192.0.2.1", user="ops", private_key=key))

    return _timed_program("typed", program, full)


def _timed_program(stack: str, program, full: bool) -> dict:
    """`program` run as a stack of its own, with no config, under the same mocks."""
    from preview.engine import run_program
    from preview.stack_file import StackConfigFile

    stack_file = StackConfigFile(project="gpu-cluster", stack=stack, config={}, secret_keys=[])
    return _timed(lambda: run_program(PROJECT_DIR, stack_file, program=program), full)


def _timed(run, full: bool) -> dict:
    start = time.perf_counter()
    plan = run()
    if full:
        from preview.report import write_artifacts
        with tempfile.TemporaryDirectory() as build:
            write_artifacts(plan, Path(build))
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "resources": len(plan.resources),
            "edges": sum(len(resource.dependencies) for resource in plan.resources)}


_MEASURES = {"stack": measure_stack, "replay": measure_replay, "pools": measure_pools,
             "floor": measure_floor, "typed": measure_typed_floor}


def child(kind: str, size: int, full: bool) -> None:
    result = _MEASURES[kind](size, full)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result["cpu_seconds"] = usage.ru_utime + usage.ru_stime
    result["peak_rss_mib"] = usage.ru_maxrss / 1024
    print(json.dumps(result))


def run_child(kind: str, size: int, full: bool) -> dict:
    command = [sys.executable, __file__, "--child", kind, str(size)] + (["--full"] if full else [])
    output = subprocess.run(command, check=True, capture_output=True, text=True,
                            cwd=PROJECT_DIR).stdout
    return json.loads(output.strip().splitlines()[-1])


def _figure(value) -> str:
    return "—" if value is None else f"{value:.2f}"


def median_of(runs: list[dict]) -> dict:
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def state_sizes() -> None:
    """Bytes of resource inputs per machine for each example stack, as Pulumi keeps them in
    its state (once as inputs, and again as outputs for commands): every input of the
    resources named after a machine (`<machine>-...`), and the stack's inputs in all."""
    from preview.engine import run_program
    from preview.stack_file import EXAMPLE_STACKS, read_stack

    print("| stack | machines | inputs of a machine's resources, most | mean "
          "| all inputs of the stack | per machine |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name in EXAMPLE_STACKS:
        plan = run_program(PROJECT_DIR, read_stack(PROJECT_DIR, name))
        sizes = {r.urn: len(json.dumps(r.inputs, default=str)) for r in plan.resources}
        machines = {r.name.split("-install-bundle")[0]
                    for r in plan.of_type("command:remote:Command")
                    if r.name.endswith("-install-bundle")}
        machines |= {r.inputs["tags"][POOL_LABEL]
                     for r in plan.of_type("aws:ec2/launchTemplate:LaunchTemplate")}
        per_machine = {m: sum(size for r in plan.resources if r.name.startswith(f"{m}-")
                              for size in [sizes[r.urn]]) for m in machines}
        total = sum(sizes.values())
        print(f"| {name} | {len(machines)} | {max(per_machine.values()):,} "
              f"| {total and sum(per_machine.values()) // len(machines):,} | {total:,} "
              f"| {total // len(machines):,} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[10, 100, 499, 1000, 10000])
    parser.add_argument("--pools", type=int, nargs="*", default=[MAX_POOLS])
    parser.add_argument("--repeat", type=int, default=3, help="runs per size; the median is shown")
    parser.add_argument("--full", action="store_true", help="write the build folder too")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "SIZE"), help=argparse.SUPPRESS)
    parser.add_argument("--state-only", action="store_true",
                        help="only the state sizes of the example stacks")
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.full)
        return
    state_sizes()
    if args.state_only:
        return
    print()

    print("| stack | resources | wall s | CPU s | peak MiB | floor wall s | floor MiB "
          "| typed floor wall s | typed floor MiB | replay wall s | wall / floor "
          "| MiB / floor | wall / typed floor | MiB / typed floor | replay / floor |")
    print("| --- |" + " ---: |" * 14)
    sizes = [("stack", f"{w} workers", w) for w in args.workers]
    sizes += [("pools", f"{p} pools", p) for p in args.pools]
    for kind, label, size in sizes:
        runs: dict[str, list[dict]] = {"stack": [], "replay": [], "floor": [], "typed": []}
        for _ in range(args.repeat):
            runs["stack"].append(run_child(kind, size, args.full))
            count = runs["stack"][-1]["resources"]
            if kind == "stack":
                runs["replay"].append(run_child("replay", size, args.full))
            runs["floor"].append(run_child("floor", count, args.full))
            runs["typed"].append(run_child("typed", count, args.full))
        stack, floor, typed = (median_of(runs[k]) for k in ("stack", "floor", "typed"))
        replay = median_of(runs["replay"])["seconds"] if runs["replay"] else None
        figures = [
            f"{stack['resources']:.0f}", f"{stack['seconds']:.2f}",
            f"{stack['cpu_seconds']:.2f}", f"{stack['peak_rss_mib']:.0f}",
            f"{floor['seconds']:.2f}", f"{floor['peak_rss_mib']:.0f}",
            f"{typed['seconds']:.2f}", f"{typed['peak_rss_mib']:.0f}", _figure(replay),
            f"{stack['seconds'] / floor['seconds']:.2f}",
            f"{stack['peak_rss_mib'] / floor['peak_rss_mib']:.2f}",
            f"{stack['seconds'] / typed['seconds']:.2f}",
            f"{stack['peak_rss_mib'] / typed['peak_rss_mib']:.2f}",
            _figure(replay and replay / floor["seconds"])]
        print(f"| {label} | " + " | ".join(figures) + " |", flush=True)
    print(f"\nGoals at the most hosts a stack may hold ({MAX_HOSTS}): wall within {GOAL_RATIO}x"
          f" and memory within {GOAL_MEMORY_RATIO}x the floor's.")


if __name__ == "__main__":
    main()
