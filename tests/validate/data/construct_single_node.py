"""Writes the single-node all_reduce_perf logs of this folder (see README.md): one process
driving 8 A100 SXM4 GPUs (`all_reduce_perf -b 8 -e 8G -f 2 -g 8`, as validate's nccl-node
pod runs it), healthy and with degraded NVLink. Run from the project root:

    PYTHONPATH=. venv/bin/python tests/validate/data/construct_single_node.py

The table and footer come from tests/acceptance/data/construct_logs.py (nccl-tests 2.18.3's
format strings and arithmetic, with their file and line); only the header differs: one
process, `nGpus 8` (src/util.cu:518) and eight devices of one host (src/util.cu:570)."""

from pathlib import Path

from tests.acceptance.data import construct_logs

HERE = Path(__file__).parent
HOST, PID = "gpu000", 5123
BUS_IDS = ("0000:07:00", "0000:0f:00", "0000:47:00", "0000:4e:00",
           "0000:87:00", "0000:90:00", "0000:b7:00", "0000:bd:00")


def header() -> list[str]:
    lines = [
        "# nccl-tests version 2.18.3 nccl-headers=23004 nccl-library=23004",
        "# Collective test starting: all_reduce_perf",
        "# nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 1 "
        "iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0",
        "#",
        "# Using devices",
    ]
    for gpu, bus in enumerate(BUS_IDS):
        lines.append(f"#  Rank {gpu:2d} Group {0:2d} Pid {PID:6d} on {HOST:>10s} "
                     f"device {gpu:2d} [{bus}] NVIDIA A100-SXM4-80GB")
    return lines


def log(busbw_peak: float) -> str:
    construct_logs.RANKS = len(BUS_IDS)  # the bus bandwidth factor 2(n-1)/n of 8 ranks
    return "\n".join(header() + construct_logs.result_lines(latency_us=28.0,
                                                            busbw_peak=busbw_peak)) + "\n"


if __name__ == "__main__":
    # 8x A100 SXM4 through NVSwitch: about the 230-250 GB/s validate/thresholds.yaml cites.
    (HERE / "constructed-a100-1x8.log").write_text(log(busbw_peak=238.0))
    # The same node with NVLink lanes down: traffic crawls at a fraction of it.
    (HERE / "constructed-a100-1x8-degraded.log").write_text(log(busbw_peak=120.0))
