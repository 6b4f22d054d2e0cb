"""The findings as a table for people or JSON for machines."""

import json
import shutil
import textwrap

from doctor.findings import OK, VERDICTS, Finding, exit_code

MARKS = {"ok": "ok", "warning": "WARNING", "problem": "PROBLEM",
         "could-not-check": "COULD NOT CHECK"}


def ordered(findings: list[Finding]) -> list[Finding]:
    """Problems first, then what could not be checked, warnings, and what is fine."""
    return sorted(findings, key=lambda f: VERDICTS.index(f.verdict))


def table(findings: list[Finding], source: str, server: str, verbose: bool) -> str:
    width = max(80, min(shutil.get_terminal_size((120, 24)).columns, 160))
    shown = [f for f in ordered(findings) if verbose or f.verdict != OK]
    rows = [(MARKS[f.verdict], f.check, f.subject, f.message) for f in shown]
    heads = ("VERDICT", "CHECK", "SUBJECT", "FINDING")
    widths = [max([len(heads[i])] + [len(row[i]) for row in rows]) for i in range(3)]
    widths = [min(w, 40) for w in widths]
    indent = sum(widths) + 6
    lines = [f"cluster at {server} ({source})", ""]
    lines.append("  ".join(h.ljust(w) for h, w in zip(heads, widths + [0])).rstrip())
    for finding, row in zip(shown, rows):
        cells = "  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths))
        message = textwrap.wrap(row[3], max(30, width - indent)) or [""]
        lines.append(f"{cells}  {message[0]}")
        lines.extend(" " * indent + more for more in message[1:])
        if finding.fix:
            for more in textwrap.wrap("fix: " + finding.fix, max(30, width - indent)):
                lines.append(" " * indent + more)
    counts = {verdict: sum(1 for f in findings if f.verdict == verdict) for verdict in VERDICTS}
    lines.append("")
    lines.append(", ".join(f"{counts[v]} {MARKS[v].lower()}" for v in VERDICTS)
                 + ("" if verbose else " (--all shows the ok ones)"))
    return "\n".join(lines) + "\n"


def as_json(findings: list[Finding], source: str, server: str) -> str:
    return json.dumps({
        "source": source,
        "server": server,
        "exitCode": exit_code(findings),
        "counts": {verdict: sum(1 for f in findings if f.verdict == verdict)
                   for verdict in VERDICTS},
        "findings": [f.as_dict() for f in ordered(findings)],
    }, indent=2) + "\n"
