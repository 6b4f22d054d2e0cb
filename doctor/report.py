"""The findings as a table for people or JSON for machines."""

import json
import shutil
import textwrap

from doctor.findings import OK, VERDICTS, Finding, exit_code

MARKS = {"ok": "ok", "warning": "WARNING", "problem": "PROBLEM",
         "could-not-check": "COULD NOT CHECK"}


INDENT = " " * 4


def ordered(findings: list[Finding]) -> list[Finding]:
    """Problems first, then what could not be checked, warnings, and what is fine."""
    return sorted(findings, key=lambda f: VERDICTS.index(f.verdict))


def table(findings: list[Finding], source: str, server: str, verbose: bool) -> str:
    """One line per finding (verdict, check, subject), its message and fix indented below."""
    width = max(60, min(shutil.get_terminal_size((100, 24)).columns, 140))
    shown = [f for f in ordered(findings) if verbose or f.verdict != OK]
    check_width = max([len(f.check) for f in shown] + [0])
    lines = [f"cluster at {server} ({source})", ""]
    if not shown:
        lines.append("nothing wrong found")
    for finding in shown:
        lines.append(f"{MARKS[finding.verdict]:<15}  {finding.check:<{check_width}}  "
                     f"{finding.subject}")
        lines.extend(_wrap(finding.message, width, INDENT))
        if finding.fix:
            lines.extend(_wrap("fix: " + finding.fix, width, INDENT + "     "))
    counts = {verdict: sum(1 for f in findings if f.verdict == verdict) for verdict in VERDICTS}
    lines.append("")
    lines.append(", ".join(f"{counts[v]} {MARKS[v].lower()}" for v in VERDICTS)
                 + ("" if verbose else " (--all shows the ok ones)"))
    return "\n".join(lines) + "\n"


def _wrap(text: str, width: int, subsequent: str) -> list[str]:
    # Names (gpu-device-plugin, kube-system/...) are not broken at their hyphens.
    return textwrap.wrap(text, width, initial_indent=INDENT, subsequent_indent=subsequent,
                         break_on_hyphens=False)


def as_json(findings: list[Finding], source: str, server: str) -> str:
    return json.dumps({
        "source": source,
        "server": server,
        "exitCode": exit_code(findings),
        "counts": {verdict: sum(1 for f in findings if f.verdict == verdict)
                   for verdict in VERDICTS},
        "findings": [f.as_dict() for f in ordered(findings)],
    }, indent=2) + "\n"
