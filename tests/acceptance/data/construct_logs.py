"""Writes the two constructed launcher logs of this folder (see README.md): what the
acceptance MPIJob's launcher prints for 2 workers x 4 GPUs with NCCL_DEBUG=INFO, over
InfiniBand, and over sockets after a silent fallback from IB. Run from the project root:

    venv/bin/python tests/acceptance/data/construct_logs.py

Every line is printed with the format string of the release the pinned image ships:
nccl-tests 2.18.3 (NVIDIA/nccl-tests f727aa2, src/util.cu) and NCCL 2.30.4 (NVIDIA/nccl
v2.30.4-1); the file and line of each format is given where it is used. The numbers follow
nccl-tests' own arithmetic (src/all_reduce.cu:59-64, src/common.cu:699-700) from a simple
latency + bandwidth model."""

from pathlib import Path

HERE = Path(__file__).parent
NODES = (("gpu000", "192.168.2.2", 2041), ("gpu001", "192.168.2.3", 1877))
GPUS = 4
RANKS = len(NODES) * GPUS
BUS_IDS = ("0000:07:00", "0000:0f:00", "0000:47:00", "0000:4e:00")


def float_str(value: float, width: int) -> str:
    """src/util.cu:457-467 getFloatStr (its `width >= 8` branch is never reached)."""
    power = 0
    val = 1
    while value >= val:
        power += 1
        val *= 10
    if power < width - 2:
        return f"{value:{width}.2f}"
    if power < width - 1:
        return f"{value:{width}.1f}"
    if power < width + 1:
        return f"{value:{width}.0f}"
    return f"{value:{width}.1e}" if width >= 7 else f"{value:{width}.0e}"


def bus_id(gpu: int) -> str:
    """NCCL's busId: the PCI bus id as one number, printed with %lx."""
    return f"{int(BUS_IDS[gpu][5:7], 16) << 12:x}"


def info(node: int, gpu: int, message: str, tid_offset: int = 0) -> str:
    """src/debug.cc:377 "%s:%d:%d " and :391 "[%d] NCCL INFO %s"."""
    host, _, pid = NODES[node]
    return f"{host}:{pid + gpu}:{pid + gpu + tid_offset} [{gpu}] NCCL INFO {message}"


def header() -> list[str]:
    lines = [
        # src/util.cu:516-518, 525, 550
        "# nccl-tests version 2.18.3 nccl-headers=23004 nccl-library=23004",
        "# Collective test starting: all_reduce_perf",
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 1 "
        "iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0",
        "#",
        "# Using devices",
    ]
    for node, (host, _, pid) in enumerate(NODES):
        for gpu in range(GPUS):
            rank = node * GPUS + gpu
            # src/util.cu:570
            lines.append(f"#  Rank {rank:2d} Group {0:2d} Pid {pid + gpu:6d} on {host:>10s} "
                         f"device {gpu:2d} [{BUS_IDS[gpu]}] NVIDIA A100-SXM4-80GB")
    return lines


def init_lines(ib: bool) -> list[str]:
    lines = []
    for node, (host, address, _) in enumerate(NODES):
        for gpu in range(GPUS):
            rank = node * GPUS + gpu
            say = lambda message: lines.append(info(node, gpu, message))  # noqa: E731
            say(f"Bootstrap: Using eno2:{address}<0>")  # src/bootstrap.cc:135
            say("cudaDriverVersion 13000")  # src/misc/cudawrap.cc:274
            say("NCCL version 2.30.4+cuda12.9")  # src/init.cc:671
            say("NCCL_SOCKET_IFNAME set by environment to eno2")  # src/misc/socket.cc:178
            if ib:
                say("NCCL_NET_PLUGIN set by environment to none")  # src/plugin/net.cc:255
                # src/transport/net_ib/init.cc:437
                say(f"NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eno2:{address}<0>")
            else:
                say("NET/IB : No device found.")  # src/transport/net_ib/init.cc:407
                # src/transport/net_socket.cc:76
                say(f"NET/Socket : Using [0]eno2:{address}<0>")
            name = "IB" if ib else "Socket"
            say(f"Initialized NET plugin {name}")  # src/plugin/net.cc:180
            say(f"Assigned NET plugin {name} to comm")  # src/plugin/net.cc:219
            say(f"Using network {name}")  # src/init.cc:481
            # src/init.cc:1837
            say(f"[Rank {rank}] ncclCommInitRankConfig comm 0x55d{rank}a3c0 rank {rank} "
                f"nranks {RANKS} cudaDev {gpu} nvmlDev {gpu} busId {bus_id(gpu)} "
                "commId 0x3a1f9c0e5b7d2468 - Init START")
    for node in range(len(NODES)):
        for gpu in range(GPUS):
            rank = node * GPUS + gpu
            # src/init.cc:1865
            lines.append(info(node, gpu,
                              f"ncclCommInitRankConfig comm 0x55d{rank}a3c0 rank {rank} nranks "
                              f"{RANKS} cudaDev {gpu} nvmlDev {gpu} busId "
                              f"{bus_id(gpu)} commId 0x3a1f9c0e5b7d2468 - Init COMPLETE"))
    return lines


def connection_lines(ib: bool) -> list[str]:
    """The ring 0->1->2->3->4->...->7->0 on two channels: P2P inside a node, NET between."""
    lines = []
    for channel in range(2):
        for rank in range(RANKS):
            peer = (rank + 1) % RANKS
            node, gpu = divmod(rank, GPUS)
            peer_node, peer_gpu = divmod(peer, GPUS)
            if node == peer_node:
                # src/transport/p2p.cc:417
                lines.append(info(node, gpu, f"Channel {channel:02d}/0 : {rank}[{gpu}] -> "
                                             f"{peer}[{peer_gpu}] via P2P/CUMEM/read"))
                continue
            suffix = "/GDRDMA" if ib else ""
            name = "IB" if ib else "Socket"
            # src/transport/net.cc:321 (send) and :368 (receive)
            lines.append(info(node, gpu, f"Channel {channel:02d}/0 : {rank}[{gpu}] -> "
                                         f"{peer}[{peer_gpu}] [send] via NET/{name}/"
                                         f"{channel}{suffix}"))
            lines.append(info(peer_node, peer_gpu, f"Channel {channel:02d}/0 : {rank}[{gpu}] -> "
                                                   f"{peer}[{peer_gpu}] [receive] via NET/"
                                                   f"{name}/{channel}{suffix}"))
    return lines


def result_lines(latency_us: float, busbw_peak: float) -> list[str]:
    factor = 2 * (RANKS - 1) / RANKS  # src/all_reduce.cu:63
    algbw_peak = busbw_peak / factor
    lines = [
        # src/util.cu:627-632
        "#",
        f"# {'':>10s}  {'':>12s}  {'':>8s}  {'':>6s}  {'':>6s}           out-of-place       "
        "                in-place          ",
        f"# {'size':>10s}  {'count':>12s}  {'type':>8s}  {'redop':>6s}  {'root':>6s}  "
        f"{'time':>7s}  {'algbw':>6s}  {'busbw':>6s}  {'#wrong':>6s}  {'time':>7s}  "
        f"{'algbw':>6s}  {'busbw':>6s}  {'#wrong':>6s} ",
        f"# {'(B)':>10s}  {'(elements)':>12s}  {'':>8s}  {'':>6s}  {'':>6s}  {'(us)':>7s}  "
        f"{'(GB/s)':>6s}  {'(GB/s)':>6s}  {'':>6s}  {'(us)':>7s}  {'(GB/s)':>6s}  "
        f"{'(GB/s)':>6s}  {'':>6s} ",
    ]
    busbws = []
    size = 8
    while size <= 8 * 1024 ** 3:
        row = f"{size:12d}  {size // 4:12d}  {'float':>8s}  {'sum':>6s}  {-1:6d}"  # util.cu:427
        for skew in (1.0, 1.004):
            time_us = (latency_us + size / (algbw_peak * 1e3)) * skew
            algbw = size / 1e9 / (time_us / 1e6)  # src/all_reduce.cu:60
            busbw = algbw * factor
            busbws.append(busbw)
            # src/util.cu:483
            row += (f"  {float_str(time_us, 7)}  {float_str(algbw, 6)}  "
                    f"{float_str(busbw, 6)}  {0:6g}")
        lines.append(row)
        size *= 2
    average = sum(busbws) / len(busbws)  # src/common.cu:699-700, 1597
    lines += [
        f"# {'Out of bounds values':<20s} : 0 OK",  # src/util.cu:648
        f"# {'Avg bus bandwidth':<20s} : {average:g} ",  # src/util.cu:649
        "#",
        "# Collective test concluded: all_reduce_perf",  # src/util.cu:651
        "#",  # src/util.cu:726
        "",  # src/util.cu:713
    ]
    return lines


def log(ib: bool) -> str:
    results = result_lines(latency_us=24.0, busbw_peak=46.0) if ib else result_lines(
        latency_us=310.0, busbw_peak=1.1)
    # Connections are made at the first collective, after the table header (as in real logs).
    lines = header() + init_lines(ib) + results[:4] + connection_lines(ib) + results[4:]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    (HERE / "constructed-ib-2x4.log").write_text(log(ib=True))
    (HERE / "constructed-socket-fallback-2x4.log").write_text(log(ib=False))
