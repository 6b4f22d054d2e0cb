"""acceptance/nccl_results.py on recorded all_reduce_perf output (tests/acceptance/data, whose
README says where each log comes from). Expected values are copied from the logs by hand."""

import io
from pathlib import Path

import pytest

from acceptance.nccl_results import Measurement, Row, main, parse, problems

DATA = Path(__file__).parent / "data"


def read(name: str) -> str:
    return (DATA / name).read_text()


def test_a_real_two_node_run_gives_its_row_and_summary():
    result = parse(read("oci-a100-2x8-all_reduce_perf.log"))
    assert result.rows == [Row(size_bytes=10737418240, count=2684354560, type="float",
                               redop="sum", root=-1,
                               out_of_place=Measurement(104989.0, 102.27, 191.76, 0),
                               in_place=Measurement(104997.0, 102.26, 191.75, 0))]
    assert (result.out_of_bounds, result.avg_bus_bandwidth) == (0, 191.752)
    # NCCL_DEBUG was not set: no transport is known, and none is claimed.
    assert result.transports == set() and result.connections == {}
    assert problems(result) == []
    assert problems(result, "IB", nodes=2) == [
        "NCCL did not use only network IB (saw: no 'Using network' line)",
        "connections between nodes not all via NET/IB (saw: no connection between nodes)"]


def test_a_real_mpijob_launcher_log_with_elided_lines():
    result = parse(read("coreweave-h100-mpijob-launcher.log"))
    assert [row.size_bytes for row in result.rows] == [
        536870912, 1073741824, 2147483648, 4294967296, 8589934592]
    assert result.rows[0].out_of_place == Measurement(2984.6, 179.88, 356.01, 0)
    assert result.rows[2].in_place == Measurement(11203.0, 191.70, 379.40, 0)
    assert result.largest.out_of_place.busbw_gbps == 386.56
    assert result.largest.in_place.algbw_gbps == 194.81
    assert result.avg_bus_bandwidth == 373.187
    assert problems(result) == []


def test_the_ib_run_shows_network_connections_gdr_and_versions():
    result = parse(read("constructed-ib-2x4.log"))
    assert [row.size_bytes for row in result.rows] == [8 * 2 ** i for i in range(31)]
    assert all(row.count == row.size_bytes // 4 for row in result.rows)
    assert result.rows[-1] == Row(8589934592, 2147483648, "float", "sum", -1,
                                  Measurement(326815.0, 26.28, 46.00, 0),
                                  Measurement(328122.0, 26.18, 45.81, 0))
    assert result.networks == {"IB"}
    assert result.connections == {"IB": 8}
    assert result.gpudirect_rdma is True
    assert result.ib_devices == {"mlx5_0:1/IB", "mlx5_1:1/IB"}
    assert (result.nccl_version, result.nccl_tests_version) == ("2.30.4+cuda12.9", "2.18.3")
    assert result.avg_bus_bandwidth == 21.078
    assert problems(result, "IB", nodes=2) == []


def test_columns_are_read_in_nccl_tests_order():
    # busbw = algbw * 2(n-1)/n for all_reduce (nccl-tests src/all_reduce.cu:63), 8 ranks here;
    # a swapped column would break it.
    for row in parse(read("constructed-ib-2x4.log")).rows:
        for half in (row.out_of_place, row.in_place):
            assert half.busbw_gbps == pytest.approx(half.algbw_gbps * 1.75, abs=0.02)
            assert half.algbw_gbps == pytest.approx(row.size_bytes / half.time_us / 1e3,
                                                    abs=0.01)


def test_the_silent_socket_fallback_is_caught_only_when_ib_is_required():
    result = parse(read("constructed-socket-fallback-2x4.log"))
    assert result.networks == {"Socket"} and result.connections == {"Socket": 8}
    assert result.gpudirect_rdma is False and result.ib_devices == set()
    assert problems(result) == []
    assert problems(result, "IB", nodes=2) == [
        "NCCL did not use only network IB (saw: Socket)",
        "connections between nodes not all via NET/IB (saw: Socket)"]


def test_one_node_needs_no_connections_between_nodes():
    text = "\n".join(line for line in read("constructed-ib-2x4.log").splitlines()
                     if " via NET/" not in line)
    assert problems(parse(text), "IB", nodes=1) == []
    assert problems(parse(text), "IB", nodes=2) == [
        "connections between nodes not all via NET/IB (saw: no connection between nodes)"]


def test_real_lines_of_the_hpcx_sharp_plugin_are_not_nccls_ib():
    # From NVIDIA/nccl-tests issue 294 (github.com/NVIDIA/nccl-tests/issues/294): the HPC-X
    # plugin names its network IBext_v6; the job pins NCCL's own IB (NCCL_NET_PLUGIN=none).
    text = (
        "h100-4:739787:739914 [1] NCCL INFO NET/IB : Using [0]mlx5_1:1/IB/SHARP "
        "[1]mlx5_2:1/IB/SHARP [2]mlx5_3:1/IB/SHARP [3]mlx5_4:1/IB/SHARP [4]mlx5_5:1/IB/SHARP "
        "[5]mlx5_6:1/IB/SHARP [6]mlx5_7:1/IB/SHARP [7]mlx5_8:1/IB/SHARP [RO]; "
        "OOB ens7:172.27.32.104<0>\n"
        "h100-4:739787:739914 [1] NCCL INFO Using network IBext_v6\n")
    result = parse(text)
    assert result.networks == {"IBext_v6"}
    assert result.ib_devices == {f"mlx5_{i}:1/IB/SHARP" for i in range(1, 9)}
    assert "NCCL did not use only network IB (saw: IBext_v6)" in problems(result, "IB")


def test_wrong_results_and_unchecked_rows():
    text = read("oci-a100-2x8-all_reduce_perf.log")
    wrong = text.replace("191.76      0", "191.76     12").replace(
        "Out of bounds values : 0 OK", "Out of bounds values : 1 FAILED")
    result = parse(wrong)
    assert result.rows[0].out_of_place.wrong == 12 and result.out_of_bounds == 1
    assert problems(result) == [
        "all_reduce_perf did not report 'Out of bounds values : 0 OK'",
        "wrong results at sizes [10737418240]"]
    # -c 0: nccl-tests prints N/A for #wrong (src/util.cu:485).
    unchecked = parse(text.replace("191.76      0", "191.76    N/A"))
    assert unchecked.rows[0].out_of_place.wrong is None


def test_an_unfinished_run_fails():
    text = read("constructed-ib-2x4.log")
    cut = text[:text.index("   134217728")]
    assert problems(parse(cut), "IB", nodes=2) == [
        "no '# Avg bus bandwidth' line: all_reduce_perf did not finish",
        "all_reduce_perf did not report 'Out of bounds values : 0 OK'"]


def test_command_line_prints_bandwidths_and_exits_by_the_check(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(read("constructed-socket-fallback-2x4.log")))
    assert main(["--network", "IB", "--nodes", "2"]) == 1
    out, err = capsys.readouterr()
    assert ("largest message 8589934592 B (float sum): out-of-place algbw 0.63 GB/s busbw "
            "1.1 GB/s") in out
    assert "average bus bandwidth 0.564059 GB/s" in out
    assert "NCCL transport: Socket" in out
    assert "FAIL: NCCL did not use only network IB (saw: Socket)" in err
    assert main([str(DATA / "constructed-ib-2x4.log"), "--network", "IB", "--nodes", "2"]) == 0
    out, _ = capsys.readouterr()
    assert "NCCL transport: IB" in out and "GPUDirect RDMA: used" in out
