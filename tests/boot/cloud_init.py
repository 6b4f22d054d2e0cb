"""Debian's real cloud-init (the installed package) run on EC2 user data in a sandbox.

`run_user_data` seeds a NoCloud datasource with the user data as EC2 hands it to an
instance (base64 decoded, still gzipped: cloud-init itself unpacks the gzip and the MIME
parts) and runs the four boot stages in new mount, network, UTS and PID namespaces
(sandbox.bash). Inside, the sandbox's own folders lie over /etc/cloud (the config below),
/var/lib (cloud-init's state, /var/lib/cloud), /var/log and /run (/run/cloud-init), and
its own files over /etc/hostname and /etc/hosts: cloud-init keeps its default paths, as on
an instance. (Moving its state with `system_info: paths: cloud_dir` instead is not honoured
everywhere: stages.py:235-246 `Init._read_cfg` reads the instance's cloud-config.txt
through default paths, so the init stage would not see nor validate the user's
cloud-config.) Only the modules a test needs run: set_hostname and update_hostname (the
#cloud-config part is applied, to the namespace's hostname and the sandbox's
/etc/hostname) and scripts_user (the shell parts, through cloud-init's real runparts).
Network config is disabled. The sandbox keeps cloud-init off the host and the network; a
part still sees the host's other files, so the step scripts under test must go through
GPU_CLUSTER_ROOT. When the sandbox's PID 1 exits the kernel kills whatever is left in it.
With `aws=AwsEmulation(...)`, moto and an IMDSv2 emulator serve inside the sandbox's
network namespace for the boot (aws_emulation.py says what runs where), and the run's
`aws` holds what they saw.

What cloud-init 22.4.2 does with the parts (/usr/lib/python3/dist-packages/cloudinit/):
- config/cc_scripts_user.py:46-54 `handle` calls `subp.runparts(<instance>/scripts)`.
- subp.py:416-424 `runparts` runs every executable file in name order with
  `subp(..., capture=False)` and on a failure only logs it (LOG.debug) and goes on with
  the next file, whatever the earlier ones returned; subp.py:426-430 then raise
  "Runparts: N failures (...) in M attempted commands", which fails the scripts_user
  module and so the stage.
- subp.py:159-163, 291-299: `subp` passes `env=None` to Popen, so a part inherits
  cloud-init's whole environment (here `env`; on an instance, what systemd gives
  cloud-final.service) and its stdout and stderr, which cloud-init has redirected to its
  output log (util.py:742-744 `fixup_output`, util.py:761 `redirect_output`).
  cloud-init's own commands use that PATH too: with stubs first on it, set_hostname's
  `hostname NAME` (distros/__init__.py:321) and the init stage's `ip --json addr`
  (netinfo.py:291) go to the stubs, so the namespace keeps its hostname (/etc/hostname is
  still written; the stubs' STUB_REAL_HOSTNAME=1 hands `hostname` to the real one) and
  the output says "Net device info failed". sandbox.bash first sets the namespace's
  hostname from /etc/hostname, as systemd does at every boot: set_hostname runs once an
  instance (config/cc_set_hostname.py:22, PER_INSTANCE).
- subp.py:94-95: a part the kernel refuses to execute (ENOEXEC, no `#!`) fails with
  "Exec format error. Missing #! in script?".
"""

import functools
import json
import os
import re
import shutil
import subprocess
from base64 import b64decode
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest
import yaml

from tests.boot.aws_emulation import AwsEmulation, AwsRecord, prepare, read_record

CLOUD_INIT = "/usr/bin/cloud-init"
SANDBOX_SCRIPT = Path(__file__).with_name("sandbox.bash")
# The environment systemd gives cloud-final.service, which sets no Environment= of its own.
SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
STAGES = ("init-local", "init", "modules-config", "modules-final")
# What sandbox.bash mounts over; the sandbox directory must not lie below them.
HIDDEN = (Path("/etc/cloud"), Path("/var/lib"), Path("/var/log"), Path("/run"))
# EC2's instance metadata gives every instance an instance ID and a local hostname.
# An ID of EC2's form (17 hex digits): RKE2's nodes make their providerID of it (rke2/lib.sh).
INSTANCE_ID = "i-05a4db0c1e2f3a4b5"
META_DATA = {"instance-id": INSTANCE_ID, "local-hostname": "ip-192-0-2-10"}
# cc_scripts_user.py:52: the instance's scripts folder, as the log names it.
SCRIPTS_DIR = Path("/var/lib/cloud/instance/scripts")
# Debian's /etc/cloud/cloud.cfg.d/05_logging.cfg: DEBUG and up to the log file, WARNING and
# up to stderr (which ends up in the output log).
LOGGING = """\
[loggers]
keys=root,cloudinit
[handlers]
keys=consoleHandler,cloudLogHandler
[formatters]
keys=arg0Formatter
[logger_root]
level=DEBUG
handlers=consoleHandler,cloudLogHandler
[logger_cloudinit]
level=DEBUG
qualname=cloudinit
handlers=
propagate=1
[handler_consoleHandler]
class=StreamHandler
level=WARNING
formatter=arg0Formatter
args=(sys.stderr,)
[handler_cloudLogHandler]
class=FileHandler
level=DEBUG
formatter=arg0Formatter
args=('/var/log/cloud-init.log', 'a', 'UTF-8')
[formatter_arg0Formatter]
format=%(asctime)s - %(filename)s[%(levelname)s]: %(message)s
"""
CONFIG = {
    "datasource_list": ["NoCloud"],
    # Only the seed folder: no probing of the host's disks for a "cidata" label.
    "datasource": {"NoCloud": {"fs_label": None}},
    # Writes no network config.
    "network": {"config": "disabled"},
    "preserve_hostname": False,
    "cloud_init_modules": ["set_hostname", "update_hostname"],
    "cloud_config_modules": [],
    "cloud_final_modules": ["scripts_user"],
    "system_info": {"distro": "debian"},
    "log_cfgs": [[LOGGING]],
    # Debian tees it to the console too (05_logging.cfg; cloud-final.service has
    # StandardOutput=journal+console); a file alone leaves no `tee` running after
    # cloud-init (util.py:800-806 starts it and never waits for it).
    "output": {"all": ">> /var/log/cloud-init-output.log"},
}

# One entry of cloud-init's log; entries may span lines (a failed command's details).
_LOG_ENTRY = re.compile(r"^(?=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - )", re.M)
# subp.py:245-252.
_RUNNING = re.compile(r"subp\.py\[DEBUG\]: Running command \['(?P<path>[^']*)'\] ")
# ProcessExecutionError's text (subp.py:68-75), logged by runparts (subp.py:423).
_FAILED = re.compile(r"subp\.py\[DEBUG\]: (?P<description>.*)\nCommand: \['(?P<path>[^']*)'\]\n"
                     r"Exit code: (?P<exit_code>\S+)\nReason: (?P<reason>.*)")


@dataclass(frozen=True)
class PartRun:
    """One user data part runparts started, in the order it started them."""

    name: str  # its file name in the instance's scripts folder, e.g. "00.sh"
    text: str  # the file as cloud-init wrote it from the MIME part
    exit_code: Optional[int]  # None: not started (see error), or the stage ended first
    error: str  # cloud-init's description of the failure; "" when it exited 0


@dataclass(frozen=True)
class CloudInitRun:
    exit_codes: dict[str, int]  # per stage in STAGES; 124 when it timed out
    output: str  # cloud-init-output.log: what cloud-init and the parts printed
    log: str  # cloud-init.log
    console: str  # what the sandbox printed outside those files (set-up failures)
    status: Optional[dict]  # status.json (per stage: start, finish, errors)
    result: Optional[dict]  # result.json (written by the final stage)
    parts: list[PartRun]
    hostname: str  # the sandbox's hostname after the run
    etc_hostname: str  # the sandbox's /etc/hostname after the run
    aws: Optional[AwsRecord] = None  # with an AWS emulation: what it saw and held
    # With after_boot: its exit code (None: it did not run) and what it printed.
    after_boot_status: Optional[int] = None
    after_boot_output: str = ""


@functools.cache
def _sandbox_problem() -> Optional[str]:
    if os.geteuid() != 0:
        return "the cloud-init sandbox needs root (mount, network and PID namespaces)"
    if not Path(CLOUD_INIT).exists():
        return "cloud-init is not installed (apt-get install cloud-init)"
    unshare = shutil.which("unshare")
    if unshare is None:
        return "unshare is not installed (apt-get install util-linux)"
    probe = subprocess.run([*_unshare(unshare), "/bin/true"], capture_output=True, text=True,
                           timeout=30)
    if probe.returncode != 0:
        return f"namespaces are unavailable here: {probe.stderr.strip()}"
    return None


def require_sandbox() -> None:
    """Skips (with the reason) unless this machine can run the sandbox."""
    problem = _sandbox_problem()
    if problem:
        pytest.skip(problem)


def _unshare(unshare: str) -> list[str]:
    # --kill-child: the sandbox's PID 1 dies with unshare, and with it everything inside.
    return [unshare, "--mount", "--net", "--uts", "--pid", "--fork", "--kill-child",
            "--mount-proc", "--propagation", "private"]


def run_user_data(user_data_b64: str, workdir: Path, env: dict[str, str],
                  stage_timeout: float = 60, aws: Optional[AwsEmulation] = None,
                  after_boot: str = "") -> CloudInitRun:
    """Boots the sandbox in `workdir` (new or empty) on `user_data_b64` (base64, as EC2
    takes it). `env` is cloud-init's environment (over a PATH as systemd sets it), which
    the parts inherit. Each stage gets `stage_timeout` seconds. With `aws`, AWS is
    emulated in the sandbox for the boot and `env` gets its endpoints. `after_boot`: a bash
    script run in the sandbox after the stages, as the booted instance (sandbox.bash)."""
    require_sandbox()
    workdir = workdir.resolve()
    if any(workdir.is_relative_to(hidden) for hidden in HIDDEN):
        raise ValueError(f"{workdir} would be hidden inside the sandbox")
    workdir.mkdir(parents=True, exist_ok=True)
    if any(workdir.iterdir()):
        raise ValueError(f"{workdir} is not empty")
    _lay_out(workdir, b64decode(user_data_b64))
    return _boot(workdir, env, stage_timeout, aws, after_boot)


def boot_again(workdir: Path, env: dict[str, str], stage_timeout: float = 60,
               aws: Optional[AwsEmulation] = None, after_boot: str = "") -> CloudInitRun:
    """The next boot of the same instance in `workdir` (after run_user_data): cloud-init
    finds its state from the first boot, as after a reboot. The run holds what this boot
    added to the logs only. With `aws`, a new emulation from that seed and the SSM
    parameters the last boot left (aws_emulation.py)."""
    require_sandbox()
    workdir = workdir.resolve()
    (workdir / "exit-codes").unlink(missing_ok=True)
    return _boot(workdir, env, stage_timeout, aws, after_boot)


def _boot(workdir: Path, env: dict[str, str], stage_timeout: float,
          aws: Optional[AwsEmulation], after_boot: str = "") -> CloudInitRun:
    cloud_dir, log_dir = workdir / "var" / "lib" / "cloud", workdir / "var" / "log"
    # /run is a tmpfs on an instance: empty at every boot.
    shutil.rmtree(workdir / "run")
    (workdir / "run").mkdir()
    offsets = {name: len(_read(log_dir / name))
               for name in ("cloud-init.log", "cloud-init-output.log")}
    launcher = prepare(workdir, aws, INSTANCE_ID) if aws else []
    for name in ("after-boot.sh", "after-boot.status", "after-boot.log"):
        (workdir / name).unlink(missing_ok=True)
    if after_boot:
        (workdir / "after-boot.sh").write_text(after_boot)
    process = subprocess.run(
        [*_unshare(shutil.which("unshare")), "/bin/bash", str(SANDBOX_SCRIPT), str(workdir),
         str(stage_timeout), *launcher],
        env={"PATH": SYSTEMD_PATH, **env, **(aws.env() if aws else {})},
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        # sandbox.bash gives the emulation 60 s to start and 30 s to stop.
        timeout=(len(STAGES) + bool(after_boot)) * (stage_timeout + 10) + 30 + (90 if aws else 0))
    console = process.stdout.decode(errors="replace")
    if process.returncode != 0:
        raise RuntimeError(f"the sandbox failed (exit code {process.returncode}):\n{console}")

    log = _read(log_dir / "cloud-init.log")[offsets["cloud-init.log"]:]
    return CloudInitRun(
        exit_codes={name: int(code) for name, code in
                    (line.split() for line in _read(workdir / "exit-codes").splitlines())},
        output=_read(log_dir / "cloud-init-output.log")[offsets["cloud-init-output.log"]:],
        log=log,
        console=console,
        status=_read_json(cloud_dir / "data" / "status.json"),
        result=_read_json(cloud_dir / "data" / "result.json"),
        parts=_parts(log, cloud_dir / "instances" / INSTANCE_ID / "scripts"),
        hostname=_read(workdir / "hostname").strip(),
        etc_hostname=_read(workdir / "etc" / "hostname").strip(),
        aws=read_record(workdir) if aws else None,
        after_boot_status=(int(_read(workdir / "after-boot.status"))
                           if (workdir / "after-boot.status").exists() else None),
        after_boot_output=_read(workdir / "after-boot.log"),
    )


def _lay_out(workdir: Path, user_data: bytes) -> None:
    """The folders and files sandbox.bash mounts over the host's."""
    seed = workdir / "var" / "lib" / "cloud" / "seed" / "nocloud"
    for folder in (workdir / "etc" / "cloud", workdir / "var" / "log", workdir / "run", seed):
        folder.mkdir(parents=True)
    (workdir / "etc" / "cloud" / "cloud.cfg").write_text(yaml.safe_dump(CONFIG))
    (workdir / "etc" / "hostname").write_text("localhost\n")
    (workdir / "etc" / "hosts").write_text("127.0.0.1 localhost\n")
    (seed / "user-data").write_bytes(user_data)
    (seed / "meta-data").write_text(yaml.safe_dump(META_DATA))


def _parts(log: str, scripts: Path) -> list[PartRun]:
    """The parts runparts started, from cloud-init's log (`scripts`: the folder they are in
    outside the sandbox). A part exited 0 when the entry after its start is no failure of
    it."""
    entries = _LOG_ENTRY.split(log)
    parts = []
    for index, entry in enumerate(entries):
        running = _RUNNING.search(entry)
        if not running or Path(running["path"]).parent != SCRIPTS_DIR:
            continue
        following = entries[index + 1] if index + 1 < len(entries) else None
        failed = _FAILED.search(following or "")
        if failed and failed["path"] == running["path"]:
            code = failed["exit_code"]
            reason = "" if failed["reason"] == "-" else f" ({failed['reason']})"
            exit_code = int(code) if code.lstrip("-").isdigit() else None
            error = failed["description"] + reason
        elif following is None:
            exit_code, error = None, "no result logged: the stage ended while it ran"
        else:
            exit_code, error = 0, ""
        name = Path(running["path"]).name
        parts.append(PartRun(name, _read(scripts / name), exit_code, error))
    return parts


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _read_json(path: Path) -> Optional[dict]:
    return json.loads(path.read_text()) if path.exists() else None
