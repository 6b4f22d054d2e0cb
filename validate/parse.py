"""Parsers for what the checks' tools print, each judged by validate/checks/.

- nccl-tests `all_reduce_perf`: acceptance/nccl_results.py (the rows, "# Out of bounds values",
  "# Avg bus bandwidth", NCCL's transport lines), the one parser the acceptance check shares.
- `dcgmi diag` (DCGM dcgmi/Diag.cpp): "Successfully ran diagnostic for group." then a table of
  `| <test> | <result> |` rows under section rows such as `|-----  Deployment  ---...|` or
  `+-----  Hardware  ---...+`; a result starts with one of the tokens of
  `DcgmiResult::Display()` (Pass, Skip, Warn, Fail, Not Run), per-GPU detail rows follow with
  an empty first cell or an indented one. A test whose GPUs did not all agree has a row per
  result, and only the first names the test (v3.3.7 Diag.cpp:1158-1203, HelperDisplayGpuResults:
  "Pass - GPUs: 0, 1, 2" then "Fail - GPU: 3" with an empty name cell): such a row is the
  test above it. Messages ("Warning", "Info", "Error"; Diag.cpp:991-1008, 45 characters a row,
  the name on the first only) follow a test's result rows. The header's first cell is
  "Diagnostic", as is the name of the hardware diagnostic test (Diag.cpp:102).
- fio `--output-format=json` (fio stat.c, show_run_stats/add_ddir_status_json): `jobs[]`,
  each with `error` and per direction `io_bytes`, `bw_bytes` (bytes/s) and `bw` (KiB/s).
- iperf3 `-J` (iperf3 src/iperf_api.c, iperf_json_finish and the end summary): `end.sum_sent`
  and `end.sum_received` with `bits_per_second`, or a top-level `error`.
"""

import json
import re
from dataclasses import dataclass, field
from typing import Optional

from acceptance.nccl_results import Result as NcclResult
from acceptance.nccl_results import parse as parse_nccl
from acceptance.nccl_results import problems as nccl_problems

__all__ = ["NcclResult", "parse_nccl", "nccl_problems", "DcgmDiag", "parse_dcgmi",
           "FioResult", "parse_fio", "parse_iperf3"]

_RESULT_TOKENS = ("Pass", "Skip", "Warn", "Fail", "Not Run")
_SECTION = re.compile(r"^[|+]-+\s+(?P<name>[A-Za-z][A-Za-z ]*?)\s+-+[+|]")
# The names of message rows (Diag.cpp DisplayVerboseInfo's callers).
_MESSAGE_NAMES = ("Warning", "Info", "Error")
_ROW = re.compile(r"^\|\s(?P<name>[^|]*?)\s*\|\s(?P<result>[^|]*?)\s*\|\s*$")


@dataclass
class DcgmDiag:
    ran: bool = False
    # (section, test, result token, the rest of the cell)
    tests: list[tuple[str, str, str, str]] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    metadata: dict[str, str] = field(default_factory=dict)

    def with_result(self, *tokens: str) -> list[tuple[str, str, str, str]]:
        return [test for test in self.tests if test[2] in tokens]


def parse_dcgmi(text: str) -> DcgmDiag:
    diag = DcgmDiag(ran="Successfully ran diagnostic for group." in text)
    section = ""
    # The test whose result rows are being read; None once its messages begin.
    test: Optional[str] = None
    for line in text.splitlines():
        line = line.rstrip()
        if match := _SECTION.match(line):
            section, test = match["name"].strip(), None
            continue
        match = _ROW.match(line)
        if not match or (match["name"], match["result"]) == ("Diagnostic", "Result"):
            continue
        name, cell = match["name"], match["result"]
        token = next((t for t in _RESULT_TOKENS if cell == t or cell.startswith(t + " ")), None)
        if token and name and not name.startswith(" ") and name not in _MESSAGE_NAMES:
            test = name
        elif not (token and not name and test):
            test = None
            if section == "Metadata" and name:
                diag.metadata[name] = cell
            elif cell:
                diag.details.append(f"{name.strip()}: {cell}".lstrip(": "))
            continue
        diag.tests.append((section, test, token, cell[len(token):].strip(" -")))
    return diag


@dataclass(frozen=True)
class FioResult:
    read_bytes_per_s: float
    write_bytes_per_s: float
    errors: tuple[str, ...]
    version: Optional[str]


def parse_fio(text: str) -> FioResult:
    """Sums every job's read and write bandwidth; ValueError when it is not fio's JSON."""
    document = json.loads(_json_part(text))
    jobs = document.get("jobs")
    if not isinstance(jobs, list) or not jobs:
        raise ValueError("no 'jobs' in fio's JSON")
    read = sum(float((job.get("read") or {}).get("bw_bytes") or 0) for job in jobs)
    write = sum(float((job.get("write") or {}).get("bw_bytes") or 0) for job in jobs)
    errors = tuple(f"job {job.get('jobname')}: error {job.get('error')}" for job in jobs
                   if job.get("error"))
    return FioResult(read, write, errors, document.get("fio version"))


def parse_iperf3(text: str) -> float:
    """Received bits per second of the test; ValueError with iperf3's own error otherwise."""
    document = json.loads(_json_part(text))
    if document.get("error"):
        raise ValueError(f"iperf3: {document['error']}")
    end = document.get("end") or {}
    received = (end.get("sum_received") or {}).get("bits_per_second")
    if received is None:
        raise ValueError("iperf3's JSON has no end.sum_received.bits_per_second")
    return float(received)


def _json_part(text: str) -> str:
    """The JSON document in a log that may hold lines before it (the pod's own echo)."""
    start = text.find("{")
    if start < 0:
        raise ValueError("no JSON document in the output")
    return text[start:]
