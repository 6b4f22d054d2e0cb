"""A check's verdict on one subject, and the exit code of a set of them."""

from dataclasses import asdict, dataclass

from contract import command

OK = "ok"
WARNING = "warning"
PROBLEM = "problem"
UNCHECKED = "could-not-check"
VERDICTS = (PROBLEM, UNCHECKED, WARNING, OK)

EXIT_UNCHECKED = command.EXIT_NOTHING_DONE


@dataclass(frozen=True)
class Finding:
    check: str
    verdict: str
    # What it is about, by name: "node moscow", "pod kubeflow/katib-mysql-5d7f", "cluster".
    subject: str
    message: str
    # One or two sentences; empty when there is nothing to do.
    fix: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def ok(check: str, subject: str, message: str) -> Finding:
    return Finding(check, OK, subject, message)


def warning(check: str, subject: str, message: str, fix: str) -> Finding:
    return Finding(check, WARNING, subject, message, fix)


def problem(check: str, subject: str, message: str, fix: str) -> Finding:
    return Finding(check, PROBLEM, subject, message, fix)


def unchecked(check: str, subject: str, message: str, fix: str = "") -> Finding:
    return Finding(check, UNCHECKED, subject, message, fix)


def exit_code(findings: list[Finding]) -> int:
    """1 when anything is wrong; else 2 when something could not be checked; else 0."""
    verdicts = {finding.verdict for finding in findings}
    return command.exit_code(PROBLEM in verdicts, UNCHECKED in verdicts)
