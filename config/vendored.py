"""The upstream files the program applies live in vendor/, pinned by content: every file's
sha256 is in vendor/SHA256SUMS (the `sha256sum` format), checked at every run before any
resource exists, so a changed file never reaches a cluster. See vendor/README.md."""

import hashlib
from pathlib import Path

from config.problems import ConfigError, Problem

PROJECT_DIR = Path(__file__).resolve().parent.parent
# Relative to the project: the provider reads the files from the program's directory, and
# an absolute path would differ per machine (a change in every other clone's plan).
VENDOR_DIR = "vendor"
SUMS_FILE = "SHA256SUMS"
RESTORE_HINT = ("restore upstream's file (git checkout -- vendor/); to move to another release, "
                "see vendor/README.md")


class VendoredFilesError(ConfigError):
    """Vendored files that are not the pinned ones. A RunError (through ConfigError), so
    `pulumi up` and the offline preview print it without a traceback."""

    def __str__(self) -> str:
        count = len(self.problems)
        lines = [f"vendored upstream files differ from {VENDOR_DIR}/{SUMS_FILE} "
                 f"({count} file{'s' if count != 1 else ''}); nothing was planned:"]
        lines += [f"  - {problem.path}: {problem.message}" for problem in self.problems]
        lines.append(f"  {RESTORE_HINT}")
        return "\n".join(lines)


def pinned_sums() -> dict[str, str]:
    """Path (relative to vendor/) -> pinned sha256."""
    sums = {}
    for line in (PROJECT_DIR / VENDOR_DIR / SUMS_FILE).read_text().splitlines():
        if line.strip():
            digest, name = line.split(maxsplit=1)
            sums[name.lstrip("*")] = digest
    return sums


def verify() -> None:
    """Raises VendoredFilesError naming every vendored file whose content is not pinned.
    About 15 ms for the 6 MB of vendor/."""
    vendor = PROJECT_DIR / VENDOR_DIR
    try:
        sums = pinned_sums()
    except (OSError, ValueError) as error:
        raise VendoredFilesError([Problem(f"{VENDOR_DIR}/{SUMS_FILE}", f"unreadable ({error})")]) \
            from None
    problems = []
    for name, pinned in sums.items():
        path = vendor / name
        try:
            found = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            problems.append(Problem(f"{VENDOR_DIR}/{name}", f"missing (pinned sha256 {pinned})"))
            continue
        if found != pinned:
            problems.append(Problem(f"{VENDOR_DIR}/{name}",
                                    f"sha256 is {found}, pinned {pinned}"))
    if problems:
        raise VendoredFilesError(problems)
