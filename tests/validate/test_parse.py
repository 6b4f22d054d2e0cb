"""The parsers on the tools' outputs (tests/validate/data/README.md says where each format
comes from), and the thresholds file."""

import json

import pytest

from tests.validate import cluster
from validate import thresholds
from validate.checks.nccl import largest_busbw
from validate.parse import parse_dcgmi, parse_fio, parse_iperf3, parse_nccl

DATA = cluster.DATA


def test_all_reduce_perf_single_node_judged_on_the_largest_message():
    result = parse_nccl((DATA / "constructed-a100-1x8.log").read_text())
    assert len(result.rows) == 31 and result.out_of_bounds == 0
    assert result.largest.size_bytes == 8 * 1024 ** 3
    assert largest_busbw(result) == 237.89
    # The average over 8 B to 8 GiB is far below: small messages are latency-bound.
    assert result.avg_bus_bandwidth == 89.1859


def test_all_reduce_perf_real_two_node_run():
    result = parse_nccl((cluster.ACCEPTANCE_DATA / "oci-a100-2x8-all_reduce_perf.log").read_text())
    assert largest_busbw(result) == 191.76 and result.avg_bus_bandwidth == 191.752


def test_dcgmi_diag_table_pass():
    diag = parse_dcgmi((DATA / "dcgmi-diag-r1-pass.txt").read_text())
    assert diag.ran
    assert diag.metadata["DCGM Version"] == "3.3.7"
    assert len(diag.tests) == 9 and {t[2] for t in diag.tests} == {"Pass"}
    assert {t[0] for t in diag.tests} == {"Deployment"}
    assert diag.details == []


def test_dcgmi_diag_table_fail_and_warn():
    diag = parse_dcgmi((DATA / "dcgmi-diag-r1-fail.txt").read_text())
    assert diag.with_result("Fail") == [("Deployment", "Page Retirement/Row Remap", "Fail", "")]
    assert [t[1] for t in diag.with_result("Warn")] == ["Persistence Mode"]
    assert diag.details[0].startswith("Warning: GPU 3 had uncorrectable memory errors")
    assert len(diag.details) == 3


def test_dcgmi_diag_partial_failure_keeps_the_failing_gpu_with_its_test():
    """8 GPUs, GPU 3 failing GPU Memory: dcgmi names the test on its first row only."""
    diag = parse_dcgmi((DATA / "dcgmi-diag-r3-partial.txt").read_text())
    assert diag.with_result("Fail") == [("Hardware", "GPU Memory", "Fail", "GPU: 3")]
    assert ("Hardware", "GPU Memory", "Pass", "GPUs: 0, 1, 2, 4, 5, 6, 7") in diag.tests
    # The hardware diagnostic test shares its name with the header's first cell.
    assert ("Hardware", "Diagnostic", "Pass", "All") in diag.tests
    assert [t[1] for t in diag.tests if t[0] == "Stress"] == [
        "SM Stress", "Targeted Stress", "Targeted Power", "Memory Bandwidth", "Memtest",
        "EUD Test"]
    assert len(diag.tests) == 9 + 1 + 4 + 6  # GPU Memory twice: its Pass and Fail rows
    assert diag.details == ["Warning: Found 12 faulty memory elements on GPU 3"]


def test_dcgmi_without_its_table_did_not_run():
    diag = parse_dcgmi("Error: unable to establish a connection to the specified host: "
                       "localhost\nError: Unable to connect to host engine. Host engine "
                       "connection invalid/disconnected.\n")
    assert not diag.ran and diag.tests == []


def test_fio_json():
    result = parse_fio((DATA / "fio-seq.json").read_text())
    assert result.version == "fio-3.36" and result.errors == ()
    assert result.write_bytes_per_s == 431947003 and result.read_bytes_per_s == 922746880


def test_fio_job_error_and_not_json():
    document = json.loads((DATA / "fio-seq.json").read_text())
    document["jobs"][0]["error"] = 28  # ENOSPC
    assert parse_fio(json.dumps(document)).errors == ("job write: error 28",)
    with pytest.raises(ValueError):
        parse_fio("fio: pid=12, err=28/file:io_u.c:1889, func=io_u error, error=No space left")


def test_iperf3_json():
    assert parse_iperf3((DATA / "iperf3-client.json").read_text()) == 23487134229.8
    assert parse_iperf3("some line first\n" + (DATA / "iperf3-client-10g.json").read_text()) \
        == 9406319812.1
    with pytest.raises(ValueError, match="Connection refused"):
        parse_iperf3((DATA / "iperf3-refused.json").read_text())


def test_thresholds_load_and_every_entry_has_a_source():
    loaded = thresholds.load()
    assert loaded.single_node
    for floor in loaded.single_node:
        assert floor.source.startswith("http") and floor.min_busbw_gbps > 0
    assert loaded.link_fraction_source
    assert loaded.single(["NVIDIA-H100-80GB-HBM3"], 8).min_busbw_gbps == 460
    assert loaded.single(["", "NVIDIA-A100-SXM4-80GB"], 8).min_busbw_gbps == 230
    # No floor for a count or a model the sources do not cover.
    assert loaded.single(["NVIDIA-A100-SXM4-80GB"], 4) is None
    assert loaded.single(["NVIDIA-H100-PCIe"], 8) is None


def test_a_thresholds_entry_without_source_is_refused(tmp_path):
    text = thresholds.PATH.read_text().replace("    source: >-", "    note: >-", 1)
    path = tmp_path / "thresholds.yaml"
    path.write_text(text)
    with pytest.raises(thresholds.ValidateError, match=r"single_node\[0\] lacks source"):
        thresholds.load(path)
