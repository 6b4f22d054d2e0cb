"""The sandbox itself, on small hand-made user data: what Debian's cloud-init 22.4.2 does
with shell parts and a #cloud-config part, and that the host stays untouched."""

import os
import socket
from pathlib import Path

# The program's own encoder: the parts as written here, nothing added.
from components.aws.boot import multipart_gzip_base64 as user_data
from tests.boot.cloud_init import STAGES, SYSTEMD_PATH, run_user_data

ALL_STAGES_PASSED = dict.fromkeys(STAGES, 0)


def test_a_part_with_a_shebang_runs_with_cloud_inits_environment(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "greet").write_text('#!/bin/sh\necho "greet stub: $*"\n')
    (bin_dir / "greet").chmod(0o755)
    data = user_data([
        '#!/bin/bash\necho "hello from $GREETING"\necho "on stderr" >&2\ngreet world\n'])

    run = run_user_data(data, tmp_path / "sandbox",
                        {"GREETING": "the sandbox", "PATH": f"{bin_dir}:{SYSTEMD_PATH}"})

    assert run.exit_codes == ALL_STAGES_PASSED, run.output
    assert [(part.name, part.exit_code) for part in run.parts] == [("00.sh", 0)]
    # Both streams, in the output log; the environment, PATH included, reached the part.
    for line in ("hello from the sandbox", "on stderr", "greet stub: world"):
        assert f"{line}\n" in run.output
    assert run.result["v1"]["errors"] == []


def test_a_part_without_a_shebang_fails_with_exec_format_error(tmp_path):
    # How the program's parts start today.
    data = user_data(
        ["# gpu-cluster step 'demo' on host 'demo' (demo.sh)\necho never printed\n"])

    run = run_user_data(data, tmp_path / "sandbox", {})

    [part] = run.parts
    assert part.exit_code is None
    assert part.error.startswith("Exec format error. Missing #! in script?")
    assert "never printed" not in run.output
    assert run.exit_codes["modules-final"] == 1
    assert run.result["v1"]["errors"] == [
        "('scripts_user', RuntimeError('Runparts: 1 failures (00.sh) in 1 attempted commands'))"]


def test_a_failed_part_does_not_stop_the_next_one(tmp_path):
    # cloudinit/subp.py:416-424 (22.4.2) `runparts`: a failure is logged and collected, and
    # the loop goes on with the next file; only afterwards (subp.py:426-430) it raises.
    data = user_data([
        "#!/bin/bash\necho first fails\nexit 1\n", "#!/bin/bash\necho second runs anyway\n"])

    run = run_user_data(data, tmp_path / "sandbox", {})

    assert [(part.name, part.exit_code) for part in run.parts] == [("00.sh", 1), ("01.sh", 0)]
    assert run.output.index("first fails\n") < run.output.index("second runs anyway\n")
    # The stage fails, and says which part.
    assert run.exit_codes == {**ALL_STAGES_PASSED, "modules-final": 1}
    assert run.status["v1"]["modules-final"]["errors"] == [
        "('scripts_user', RuntimeError('Runparts: 1 failures (00.sh) in 2 attempted commands'))"]
    assert "Failed to run module scripts_user" in run.output


def test_the_cloud_config_part_is_validated_and_applied(tmp_path):
    data = user_data(["#!/bin/bash\necho \"part sees $(hostname)\"\n"],
                     "#cloud-config\nhostname: sandbox-host\n")

    run = run_user_data(data, tmp_path / "sandbox", {})

    assert run.exit_codes == ALL_STAGES_PASSED, run.output
    # Over the instance metadata's local-hostname, in the sandbox only.
    assert run.hostname == run.etc_hostname == "sandbox-host"
    assert "part sees sandbox-host\n" in run.output
    assert socket.gethostname() != "sandbox-host"
    assert "Invalid cloud-config" not in run.log


def test_an_invalid_cloud_config_part_is_reported(tmp_path):
    data = user_data([], "#cloud-config\nhostname: sandbox-host\nruncmd: 5\n")

    run = run_user_data(data, tmp_path / "sandbox", {})

    # cloudinit/cmd/main.py:478-485 checks the merged config against cloud-init's schema;
    # a problem is a warning in the log and the output, not a failed stage.
    assert "Invalid cloud-config provided" in run.output
    assert run.exit_codes == ALL_STAGES_PASSED
    assert run.hostname == "sandbox-host"


def test_the_sandbox_leaves_the_host_as_it_was(tmp_path):
    marker = f"sandbox-leftover-{os.getpid()}"
    data = user_data([
        "#!/bin/bash\nhostname changed-by-a-part\n"
        f"bash -c 'sleep 300; : {marker}' >/dev/null 2>&1 &\n"],
        "#cloud-config\nhostname: sandbox-host\n")
    watched = [Path(p) for p in ("/etc/hostname", "/etc/hosts", "/etc/cloud", "/var/lib/cloud",
                                 "/run/cloud-init", "/var/log/cloud-init.log",
                                 "/var/log/cloud-init-output.log")]
    before = host_state(watched)

    run = run_user_data(data, tmp_path / "sandbox", {})

    assert run.hostname == "changed-by-a-part"
    assert host_state(watched) == before
    # The part's background process died with the sandbox's PID namespace.
    assert not [pid for pid in os.listdir("/proc") if pid.isdigit() and marker in cmdline(pid)]


def host_state(paths: list[Path]) -> dict:
    return {
        "hostname": socket.gethostname(),
        "mounts": Path("/proc/self/mountinfo").read_text(),
        "files": {str(path): snapshot(path) for path in paths},
    }


def snapshot(path: Path):
    if path.is_dir():
        return sorted(str(p) for p in path.rglob("*"))
    return path.read_bytes() if path.exists() else None


def cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:  # the process is gone
        return ""
