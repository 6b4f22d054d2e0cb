"""Drift on hosts: each step whose envelope answers `check` (components/scripts/check/lib.sh)
is run as `sudo -n bash -s -- check` with the envelope on stdin, as `pulumi up` runs its
create; exit 0 in sync, 3 drifted (its `drift:` lines say what). `pulumi refresh` cannot see
this: a remote command's state is what it ran, not what the host holds now.

The envelopes are the ones `python -m preview STACK` writes (build/<stack>/hosts/<host>/
NN-<step>.sh, preview/report.py). One that holds a preview placeholder is never sent: its
check would test a made-up value."""

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

from contract.names import CHECK_BRANCH, REDACTED, UNKNOWN
from doctor import DoctorError

# A secret the preview hides and an output known only after `pulumi up`.
PLACEHOLDERS = (REDACTED, UNKNOWN)
EXIT_IN_SYNC, EXIT_DRIFTED = 0, 3
CHECK_TIMEOUT_SECONDS = 300
_ENVELOPE_NAME = re.compile(r"^\d+-(?P<step>[a-z0-9-]+)\.sh$")


@dataclass(frozen=True)
class Envelope:
    host: str
    step: str
    path: Path
    text: str

    @property
    def placeholder(self) -> Optional[str]:
        return next((marker for marker in PLACEHOLDERS if marker in self.text), None)


@dataclass(frozen=True)
class Result:
    """One check's outcome: its exit code, its drift lines, the end of its error output."""

    exit_code: int
    drift: tuple[str, ...] = ()
    error: str = ""


# step -> its result, or None when not collected; or {UNREACHABLE: why} (doctor/hosts.py).
HostResults = dict[str, Union[Result, None, str]]


@dataclass
class Drift:
    envelopes: dict[str, list[Envelope]]
    results: dict[str, HostResults] = field(default_factory=dict)


def envelopes(build: str) -> dict[str, list[Envelope]]:
    """The envelopes under `build`/hosts that answer `check`, by host."""
    hosts = Path(build) / "hosts"
    if not hosts.is_dir():
        raise DoctorError(f"--drift '{build}' has no hosts/ folder: give the folder "
                          "`python -m preview STACK` writes (build/STACK)")
    found: dict[str, list[Envelope]] = {}
    for folder in sorted(path for path in hosts.iterdir() if path.is_dir()):
        for path in sorted(folder.iterdir()):
            match = _ENVELOPE_NAME.match(path.name)
            if match is None:
                continue
            try:
                text = path.read_text()
            except (OSError, UnicodeDecodeError) as error:
                raise DoctorError(f"cannot read {path}: {type(error).__name__}") from None
            if CHECK_BRANCH in text.splitlines():
                found.setdefault(folder.name, []).append(
                    Envelope(folder.name, match["step"], path, text))
    return found


def record_name(step: str) -> str:
    return f"check-{step}.txt"


def as_record(result: Result) -> str:
    """`exit N`, then the drift lines, then the error output's end (`error: ...`)."""
    lines = [f"exit {result.exit_code}", *(f"drift: {line}" for line in result.drift)]
    lines += [f"error: {line}" for line in result.error.splitlines()]
    return "\n".join(lines) + "\n"


def parse_record(text: str) -> Optional[Result]:
    """A recorded check (as_record); None when it is not one."""
    lines = text.splitlines()
    if not lines or not re.fullmatch(r"exit \d{1,3}", lines[0]):
        return None
    return Result(int(lines[0].split()[1]),
                  tuple(line[len("drift: "):] for line in lines[1:] if line.startswith("drift: ")),
                  "\n".join(line[len("error: "):] for line in lines[1:]
                            if line.startswith("error: ")))


def result_of(exit_code: int, stdout: str, stderr: str) -> Result:
    drift = tuple(line[len("drift: "):] for line in stdout.splitlines()
                  if line.startswith("drift: "))
    error = "" if exit_code in (EXIT_IN_SYNC, EXIT_DRIFTED) else \
        "\n".join(stderr.strip().splitlines()[-3:])
    return Result(exit_code, drift, error)


def read_recorded(folder: str, found: dict[str, list[Envelope]]) -> dict[str, HostResults]:
    """Recorded checks, DIR/<host>/check-<step>.txt, of the hosts that have a folder."""
    root = Path(folder)
    if not root.is_dir():
        raise DoctorError(f"--host-outputs '{folder}' is not a folder")
    results: dict[str, HostResults] = {}
    for host, host_envelopes in found.items():
        if not (root / host).is_dir():
            continue
        results[host] = {}
        for envelope in host_envelopes:
            path = root / host / record_name(envelope.step)
            try:
                results[host][envelope.step] = parse_record(path.read_text()) or Result(
                    -1, error=f"{path} is not a recorded check (its first line: exit N)")
            except FileNotFoundError:
                results[host][envelope.step] = None
            except (OSError, UnicodeDecodeError) as error:
                raise DoctorError(f"cannot read {path}: {type(error).__name__}") from None
    return results


def check_ssh(address: str, user: Optional[str], identity: Optional[str],
              host_envelopes: list[Envelope], folder: Optional[str]) -> HostResults:
    """Runs each envelope's check on the host (`sudo -n bash -s -- check`, BatchMode); one
    holding a placeholder is not sent. Records them under `folder`/<host> when given."""
    from doctor.hosts import UNREACHABLE
    target = f"{user}@{address}" if user else address
    base = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR"]
    if identity:
        base += ["-i", identity]
    results: HostResults = {}
    for envelope in host_envelopes:
        if envelope.placeholder is not None:
            continue
        try:
            done = subprocess.run([*base, target, "--", "sudo -n bash -s -- check"],
                                  input=envelope.text, capture_output=True, text=True,
                                  timeout=CHECK_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            results[envelope.step] = Result(-1, error=f"no answer in {CHECK_TIMEOUT_SECONDS} s")
            continue
        except OSError as error:
            raise DoctorError(f"cannot run ssh: {type(error).__name__}") from None
        if done.returncode == 255:
            last = (done.stderr.strip().splitlines() or ["exit code 255"])[-1][:200]
            return {UNREACHABLE: f"ssh {target} failed: {last}"}
        results[envelope.step] = result_of(done.returncode, done.stdout, done.stderr)
    if folder is not None:
        place = Path(folder) / host_envelopes[0].host
        place.mkdir(parents=True, exist_ok=True)
        for step, result in results.items():
            if isinstance(result, Result):
                (place / record_name(step)).write_text(as_record(result))
    return results
