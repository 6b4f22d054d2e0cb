r"""Reads the output of nccl-tests' `all_reduce_perf` (the acceptance MPIJob's launcher log):
the result rows, the summary lines, and which NCCL network transport the ranks used.

    kubectl -n gpu-acceptance logs job/nccl-tests-launcher \
        | python -m acceptance.nccl_results [--network IB] [--nodes N]

prints the largest message's algorithm and bus bandwidth and the average bus bandwidth, and
exits non-zero when the run failed the same rules the launcher applies in the cluster
(`LAUNCHER_SCRIPT` in acceptance/mpi_benchmark.py).

Formats, from the sources of the versions the pinned image ships (config/versions.py):
- nccl-tests 2.18.3 (NVIDIA/nccl-tests f727aa2, src/util.cu): a row is
  `"%12li  %12li  %8s  %6s  %6s"` (size, count, type, redop, root; line 427) followed by
  `"  %7s  %6s  %6s  %6g"` (time, algbw, busbw, #wrong; line 483) for out-of-place, then
  in-place; `#wrong` is `N/A` without data checks (line 485). The footer is
  `"# %-20s : %d %s"` "Out of bounds values" and `"# %-20s : %g %s"` "Avg bus bandwidth"
  (lines 648-649). Older releases print the same columns with one space less before `#wrong`.
- NCCL 2.30.4 (NVIDIA/nccl v2.30.4-1): every INFO line is `<host>:<pid>:<tid> [<dev>] NCCL INFO
  <message>` (src/debug.cc:377, 391), possibly after a timestamp; the transport a communicator uses
  is `Using network %s` (src/init.cc:481) with the names "IB" (src/transport/net_ib/common.cc:174)
  and "Socket" (src/transport/net_socket.cc:778); each connection to another node is
  `Channel %02d/%d : %d[%d] -> %d[%d] [send|receive] via NET/%s/%d...` plus `/GDRDMA` when
  GPUDirect RDMA is used (src/transport/net.cc:321, 368); the IB devices found are
  `NET/IB : Using%s %s; OOB %s:%s` (src/transport/net_ib/init.cc:437).
"""

import argparse
import re
import sys
from dataclasses import dataclass, field
from typing import Optional

_NUMBER = r"[0-9][0-9.eE+-]*|N/A"
_ROW = re.compile(
    r"^\s*(?P<size>\d+)\s+(?P<count>\d+)\s+(?P<type>\w+)\s+(?P<redop>\w+)\s+(?P<root>-?\d+)"
    + "".join(rf"\s+(?P<{place}_{column}>{_NUMBER})"
              for place in ("oop", "ip") for column in ("time", "algbw", "busbw", "wrong"))
    + r"\s*$")
_OUT_OF_BOUNDS = re.compile(r"^# Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?")
_AVG_BUS_BW = re.compile(r"^# Avg bus bandwidth\s*:\s*([0-9][0-9.eE+-]*)")
_NETWORK = re.compile(r"NCCL INFO Using network (\S+)")
_CONNECTION = re.compile(r"NCCL INFO Channel \d+/\d+ : .* via NET/([^/\s]+)/(\S*)")
_IB_DEVICES = re.compile(r"NCCL INFO NET/IB : Using(.*?); OOB")
_NCCL_VERSION = re.compile(r"NCCL (?:INFO )?NCCL version (\S+)|^NCCL version (\S+)")
_TESTS_VERSION = re.compile(r"^# nccl-tests version (\S+)")


def _number(text: str) -> Optional[float]:
    return None if text == "N/A" else float(text)


@dataclass(frozen=True)
class Measurement:
    """One half of a row: out-of-place or in-place."""

    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    # Elements that came out wrong; None when the run did not check (-c 0).
    wrong: Optional[int]


@dataclass(frozen=True)
class Row:
    size_bytes: int
    count: int
    type: str
    redop: str
    root: int
    out_of_place: Measurement
    in_place: Measurement


@dataclass
class Result:
    rows: list[Row] = field(default_factory=list)
    # "# Out of bounds values : N OK|FAILED"; None when the run never got there.
    out_of_bounds: Optional[int] = None
    avg_bus_bandwidth: Optional[float] = None
    nccl_version: Optional[str] = None
    nccl_tests_version: Optional[str] = None
    # Networks NCCL chose ("Using network X", one line per rank and communicator).
    networks: set[str] = field(default_factory=set)
    # Transports of the connections between nodes ("via NET/X/...") and how many there were.
    connections: dict[str, int] = field(default_factory=dict)
    # Whether any connection used GPUDirect RDMA ("via NET/IB/0/GDRDMA").
    gpudirect_rdma: bool = False
    # The HCAs of "NET/IB : Using [0]mlx5_0:1/IB ...".
    ib_devices: set[str] = field(default_factory=set)

    @property
    def largest(self) -> Optional[Row]:
        return max(self.rows, key=lambda row: row.size_bytes) if self.rows else None

    @property
    def transports(self) -> set[str]:
        """Every network name NCCL reported, for the communicators and their connections."""
        return self.networks | set(self.connections)


def parse(text: str) -> Result:
    result = Result()
    for line in text.splitlines():
        row = _ROW.match(line)
        if row:
            result.rows.append(_row(row))
            continue
        if match := _OUT_OF_BOUNDS.match(line):
            result.out_of_bounds = int(match[1])
        elif match := _AVG_BUS_BW.match(line):
            result.avg_bus_bandwidth = float(match[1])
        elif match := _TESTS_VERSION.match(line):
            result.nccl_tests_version = match[1]
        elif match := _NETWORK.search(line):
            result.networks.add(match[1])
        elif match := _CONNECTION.search(line):
            name = match[1]
            result.connections[name] = result.connections.get(name, 0) + 1
            result.gpudirect_rdma |= "/GDRDMA" in match[2]
        elif match := _IB_DEVICES.search(line):
            result.ib_devices.update(re.findall(r"\[\d+\](\S+)", match[1]))
        elif match := _NCCL_VERSION.search(line):
            result.nccl_version = match[1] or match[2]
    return result


def _row(match: re.Match) -> Row:
    def half(place: str) -> Measurement:
        wrong = _number(match[f"{place}_wrong"])
        return Measurement(time_us=float(match[f"{place}_time"]),
                           algbw_gbps=float(match[f"{place}_algbw"]),
                           busbw_gbps=float(match[f"{place}_busbw"]),
                           wrong=None if wrong is None else int(wrong))

    return Row(size_bytes=int(match["size"]), count=int(match["count"]), type=match["type"],
               redop=match["redop"], root=int(match["root"]),
               out_of_place=half("oop"), in_place=half("ip"))


def problems(result: Result, network: Optional[str] = None, nodes: int = 1) -> list[str]:
    """Why the run does not pass: it finished with correct results, and when `network` is
    given, NCCL used that network and nothing else (between nodes too, when there are
    several)."""
    found = []
    if result.avg_bus_bandwidth is None:
        found.append("no '# Avg bus bandwidth' line: all_reduce_perf did not finish")
    if result.out_of_bounds != 0:
        found.append("all_reduce_perf did not report 'Out of bounds values : 0 OK'")
    wrong = [row.size_bytes for row in result.rows
             if (row.out_of_place.wrong or 0) or (row.in_place.wrong or 0)]
    if wrong:
        found.append(f"wrong results at sizes {wrong}")
    if network:
        if result.networks != {network}:
            seen = ", ".join(sorted(result.networks)) or "no 'Using network' line"
            found.append(f"NCCL did not use only network {network} (saw: {seen})")
        if nodes > 1 and set(result.connections) != {network}:
            seen = ", ".join(sorted(result.connections)) or "no connection between nodes"
            found.append(f"connections between nodes not all via NET/{network} (saw: {seen})")
    return found


def summary(result: Result) -> str:
    lines = []
    if result.largest:
        row = result.largest
        lines.append(
            f"largest message {row.size_bytes} B ({row.type} {row.redop}): out-of-place "
            f"algbw {row.out_of_place.algbw_gbps} GB/s busbw {row.out_of_place.busbw_gbps} GB/s, "
            f"in-place algbw {row.in_place.algbw_gbps} GB/s busbw {row.in_place.busbw_gbps} GB/s")
    if result.avg_bus_bandwidth is not None:
        lines.append(f"average bus bandwidth {result.avg_bus_bandwidth} GB/s")
    transports = ", ".join(sorted(result.transports)) or "not logged (NCCL_DEBUG below INFO)"
    lines.append(f"NCCL transport: {transports}")
    if result.connections:
        lines.append(f"GPUDirect RDMA: {'used' if result.gpudirect_rdma else 'not used'}")
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", nargs="?", type=argparse.FileType("r"), default=sys.stdin)
    parser.add_argument("--network", help="fail unless NCCL used only this network, e.g. IB")
    parser.add_argument("--nodes", type=int, default=1, help="GPU nodes the run spanned")
    args = parser.parse_args(argv)
    result = parse(args.log.read())
    print(summary(result))
    found = problems(result, args.network, args.nodes)
    for problem in found:
        print(f"FAIL: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
