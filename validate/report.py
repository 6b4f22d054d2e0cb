"""Verdicts and how they are shown: a table (stdout), JSON, and JUnit XML for CI (one
<testcase> per check and subject; a failure is <failure>, could-not-check is <error>, a
skipped check <skipped>, as Jenkins' and GitLab's JUnit readers count them)."""

import json
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from typing import Optional

from contract import command

PASS, FAIL, UNCHECKED, SKIPPED = "pass", "fail", "could-not-check", "skipped"


@dataclass
class Verdict:
    check: str
    subject: str
    status: str
    detail: str
    seconds: float = 0.0
    measured: dict = field(default_factory=dict)
    threshold: Optional[dict] = None
    # The tool's own output, cut, for the JSON report and JUnit's system-out.
    output: str = ""


def exit_code(verdicts: list[Verdict]) -> int:
    statuses = {v.status for v in verdicts}
    return command.exit_code(FAIL in statuses, UNCHECKED in statuses or not verdicts)


def counts(verdicts: list[Verdict]) -> dict[str, int]:
    return {status: sum(v.status == status for v in verdicts)
            for status in (PASS, FAIL, UNCHECKED, SKIPPED)}


def table(verdicts: list[Verdict], source: str, server: str) -> str:
    lines = [f"cluster at {server} ({source})", ""]
    width = max([len(v.check) for v in verdicts] + [5])
    subject_width = max([len(v.subject) for v in verdicts] + [7])
    lines.append(f"{'verdict':<16} {'check':<{width}} {'subject':<{subject_width}} seconds")
    for v in verdicts:
        lines.append(f"{v.status:<16} {v.check:<{width}} {v.subject:<{subject_width}} "
                     f"{v.seconds:7.0f}")
        lines += [f"    {line}" for line in v.detail.splitlines()]
    tally = counts(verdicts)
    lines += ["", ", ".join(f"{number} {status}" for status, number in tally.items())]
    return "\n".join(lines) + "\n"


def as_json(verdicts: list[Verdict], source: str, server: str) -> str:
    return json.dumps({"source": source, "server": server, "exitCode": exit_code(verdicts),
                       "counts": counts(verdicts),
                       "verdicts": [asdict(v) for v in verdicts]}, indent=2) + "\n"


def junit(verdicts: list[Verdict], source: str) -> str:
    tally = counts(verdicts)
    suite = ET.Element("testsuite", {
        "name": "gpu-cluster validate", "tests": str(len(verdicts)),
        "failures": str(tally[FAIL]), "errors": str(tally[UNCHECKED]),
        "skipped": str(tally[SKIPPED]),
        "time": f"{sum(v.seconds for v in verdicts):.3f}"})
    ET.SubElement(ET.SubElement(suite, "properties"), "property",
                  {"name": "source", "value": source})
    for v in verdicts:
        case = ET.SubElement(suite, "testcase", {"classname": f"validate.{v.check}",
                                                 "name": v.subject, "time": f"{v.seconds:.3f}"})
        first = v.detail.splitlines()[0] if v.detail else v.status
        if v.status == FAIL:
            ET.SubElement(case, "failure", {"message": first, "type": "fail"}).text = v.detail
        elif v.status == UNCHECKED:
            ET.SubElement(case, "error", {"message": first,
                                          "type": "could-not-check"}).text = v.detail
        elif v.status == SKIPPED:
            ET.SubElement(case, "skipped", {"message": first})
        if v.output:
            ET.SubElement(case, "system-out").text = v.output
    root = ET.Element("testsuites", {"name": "gpu-cluster validate"})
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"
