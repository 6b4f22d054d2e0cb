"""The offline preview's reading of Pulumi.yaml and the stack file: a file it cannot read
is named with the line and column, never a traceback; secrets the stack file does not set
are told apart from encrypted ones; a client-to-existing stack previews."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from config import load
from preview.engine import run_program
from preview.report import tree
from preview.stack_file import StackFileError, read_stack
from preview.vpn_placeholder import PLACEHOLDER_REMOTE, client_profile
from tests.builders import PROJECT_DIR, as_cli_config, hybrid_config

VALID_PROJECT = (PROJECT_DIR / "Pulumi.yaml").read_text()
CLIENT_TO_EXISTING = textwrap.dedent("""\
    config:
      gpu-cluster:layout: hybrid
      gpu-cluster:network:
        lanCidr: 192.168.2.0/24
      gpu-cluster:hosts:
        - name: gpu000
          address: 192.168.2.2
          sshHostKey: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPvBQLorBQY59OKCmXrgRZHMkIaXzJ4GpXZeV6uGFIw
          gpus: 4
      gpu-cluster:storage:
        efs:
          anonymousNfs: true
      gpu-cluster:backup:
        recipients: [age1jrhjtn2rvyheaj4zywcdp6e2ugecmx9aveej8syxafje9qvah9nqe2cz9y]
      gpu-cluster:aws:
        region: us-east-1
        adminCidrs: [198.51.100.0/24]
      gpu-cluster:vpn:
        mode: client-to-existing
        existingServerAddress: 192.168.2.1
      gpu-cluster:sshPrivateKey:
        secure: AAABAKvhIqjLcu8=
    """)


def project(tmp_path: Path, stack_text: str, project_text: str = VALID_PROJECT) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "Pulumi.yaml").write_text(project_text)
    (folder / "__main__.py").write_text((PROJECT_DIR / "__main__.py").read_text())
    (folder / "Pulumi.test.yaml").write_text(stack_text)
    return folder


UNREADABLE = [
    # (id, stack file, Pulumi.yaml, the error)
    ("flow list never closed", "config:\n  gpu-cluster:layout: [bare\n", VALID_PROJECT,
     "Pulumi.test.yaml, line 2, column 23: not valid YAML: this `[` is not closed by `]`"),
    ("indented key", "config:\n  gpu-cluster:layout: bare-metal\n   foo: 1\n", VALID_PROJECT,
     "Pulumi.test.yaml, line 3, column 7: not valid YAML: `foo: 1` is indented deeper than "
     "the key above it (indent it like that key), or its value holds \": \" (quote the value)"),
    ("tab indentation", "config:\n\tgpu-cluster:layout: cloud\n", VALID_PROJECT,
     "Pulumi.test.yaml, line 2, column 1: not valid YAML: a tab; indent with spaces only"),
    # The mistake is on line 4; PyYAML stops on line 5.
    ("no space after a colon", "config:\n  gpu-cluster:hosts:\n    - name: moscow\n"
     "      address:192.168.2.2\n      gpus: 4\n", VALID_PROJECT,
     "Pulumi.test.yaml, line 4, column 7: not valid YAML: `address:192.168.2.2` is not "
     "`key: value`: put a space after the colon, or quote the text"),
    ("key indented less than its neighbours", "config:\n  gpu-cluster:hosts:\n"
     "    - name: moscow\n      address: 192.168.2.2\n     role: worker\n", VALID_PROJECT,
     "Pulumi.test.yaml, line 5, column 6: not valid YAML: `role: worker` is indented by 5 "
     "spaces, which matches no key above it: indent it like the keys beside it (or like its "
     "parent's, to end the section)"),
    ("no config section", "gpu-cluster:layout: bare-metal\ngpu-cluster:hosts: []\n",
     VALID_PROJECT, "Pulumi.test.yaml: has no `config:` section: its keys "
     "(gpu-cluster:layout, gpu-cluster:hosts) must be indented under a first line `config:`"),
    ("a config key beside config", "config:\n  gpu-cluster:layout: cloud\n"
     "gpu-cluster:hosts: []\n", VALID_PROJECT, "Pulumi.test.yaml: gpu-cluster:hosts is not "
     "a key of a stack file (those are secretsprovider, encryptedkey, encryptionsalt, config, "
     "environment); a config key goes under `config:`, indented like the others"),
    ("stack file is a list", "- gpu-cluster:layout: cloud\n", VALID_PROJECT,
     "Pulumi.test.yaml: the file must be a mapping of keys to values, not a list"),
    ("stack file is a scalar", "layout\n", VALID_PROJECT,
     "Pulumi.test.yaml: the file must be a mapping of keys to values, not a single value (str)"),
    ("config is a list", "config:\n  - gpu-cluster:layout\n", VALID_PROJECT,
     "Pulumi.test.yaml: `config` must be a mapping of keys to values, not a list"),
    ("config key is a number", "config:\n  1: cloud\n", VALID_PROJECT,
     "Pulumi.test.yaml: config key 1 must be a string like gpu-cluster:layout"),
    ("Pulumi.yaml syntax", "config: {}\n", "name: gpu-cluster\nruntime: [python\n",
     "Pulumi.yaml, line 2, column 10: not valid YAML: this `[` is not closed by `]`"),
    ("Pulumi.yaml is a list", "config: {}\n", "- name\n",
     "Pulumi.yaml: the file must be a mapping of keys to values, not a list"),
    ("Pulumi.yaml without a name", "config: {}\n", "runtime: python\n",
     "Pulumi.yaml: `name` must be the project's name (a string)"),
    ("Pulumi.yaml config is a scalar", "config: {}\n", "name: gpu-cluster\nconfig: 3\n",
     "Pulumi.yaml: `config` must be a mapping of keys to values, not a single value (int)"),
]


@pytest.mark.parametrize("stack_text, project_text, error", [c[1:] for c in UNREADABLE],
                         ids=[c[0] for c in UNREADABLE])
def test_an_unreadable_file_is_named_with_its_line_and_column(tmp_path, stack_text,
                                                               project_text, error):
    with pytest.raises(StackFileError) as caught:
        read_stack(project(tmp_path, stack_text, project_text), "test")
    assert str(caught.value) == error


def run_preview(folder: Path, tmp_path: Path, stack: str = "test") -> subprocess.CompletedProcess:
    script = ("import sys; sys.path.insert(0, sys.argv[1]); import preview.__main__ as m;"
              "from pathlib import Path; m.PROJECT_DIR = Path(sys.argv[2]);"
              "sys.exit(m.main([sys.argv[4], '--quiet', '--build-dir', sys.argv[3]]))")
    return subprocess.run([sys.executable, "-c", script, str(PROJECT_DIR), str(folder),
                           str(tmp_path / "build"), stack], capture_output=True, text=True,
                          timeout=300, cwd=folder)


def test_the_preview_prints_a_yaml_error_in_one_line(tmp_path):
    result = run_preview(project(tmp_path, "config:\n  gpu-cluster:layout: [bare\n"), tmp_path)
    assert result.returncode == 2
    assert result.stderr == ("error: Pulumi.test.yaml, line 2, column 23: not valid YAML: "
                             "this `[` is not closed by `]`\n")


def test_the_offline_policy_run_names_an_unreadable_stack_file(tmp_path, monkeypatch, capsys):
    from policy import offline

    folder = project(tmp_path, "- gpu-cluster:layout: cloud\n")
    real = offline.preview_plan
    monkeypatch.setattr(offline, "preview_plan", lambda stack: real(stack, folder))
    assert offline.main(["test"]) == 2
    assert capsys.readouterr().err == ("stack test: could not check: Pulumi.test.yaml: the file "
                                       "must be a mapping of keys to values, not a list\n")


SECRETS = [
    # (id, the stack's sshPrivateKey lines, the preview's line about it)
    ("not set", "", "gpu-cluster:sshPrivateKey: not set: `pulumi up` will refuse; set it with "
     "`pulumi config set --secret gpu-cluster:sshPrivateKey < ~/.ssh/id_ed25519`"),
    ("encrypted", "  gpu-cluster:sshPrivateKey:\n    secure: AAABAKvhIqjLcu8=\n",
     "gpu-cluster:sshPrivateKey: encrypted: placeholder used (`pulumi up` decrypts it)"),
]


@pytest.mark.parametrize("lines, shown", [c[1:] for c in SECRETS], ids=[c[0] for c in SECRETS])
def test_a_missing_secret_is_told_apart_from_an_encrypted_one(tmp_path, lines, shown):
    stack = (PROJECT_DIR / "Pulumi.dev.yaml").read_text()
    assert "sshPrivateKey:" not in stack.replace("# ", "")
    folder = project(tmp_path, stack + lines)
    report = tree(run_program(folder, read_stack(folder, "test")))
    assert f"  {shown}\n" in report
    other = [c[2] for c in SECRETS if c[2] != shown][0]
    assert other not in report


PROFILE_CASES = [
    ("profile not set", ""),
    ("profile encrypted", "  gpu-cluster:vpnClientProfile:\n    secure: AAABAKvhIqjLcu8=\n"),
]


@pytest.mark.parametrize("lines", [c[1] for c in PROFILE_CASES], ids=[c[0] for c in PROFILE_CASES])
def test_a_client_to_existing_stack_previews(tmp_path, lines):
    folder = project(tmp_path, CLIENT_TO_EXISTING + lines)
    plan = run_program(folder, read_stack(folder, "test"))
    client = plan.named("control-plane-install-openvpn-client")
    stdin = plan.redact(client.inputs["stdin"])
    assert "export OPENVPN_CONFIG='[secret]'" in stdin
    report = tree(plan)
    state = "not set: `pulumi up` will refuse" if not lines else "encrypted: placeholder used"
    assert f"  gpu-cluster:vpnClientProfile: {state}" in report


def test_the_placeholder_profile_passes_the_config_checks():
    values = hybrid_config(workers=1)
    values["vpn"] = {"mode": "client-to-existing", "existingServerAddress": "192.168.2.1"}
    values["vpnClientProfile"] = client_profile()
    cli = as_cli_config(values)
    settings = load(cli.config, cli.secret_keys, stack="test")
    assert f"remote {PLACEHOLDER_REMOTE} 1194" in settings.vpn_client_profile.get_secret_value()


def openvpn_reads(profile: str, folder: Path) -> str:
    """openvpn's log for the profile, run without a network (its own namespace): it parses
    the profile and loads the keys, then finds no route to the server and gives up."""
    from tests.vpn.netns import require_network_namespaces

    require_network_namespaces()
    path = folder / "profile.ovpn"
    path.write_text(profile)
    path.chmod(0o600)
    result = subprocess.run(["unshare", "-n", "openvpn", "--config", str(path), "--verb", "3",
                             "--connect-retry-max", "1", "--connect-retry", "1"],
                            capture_output=True, text=True, timeout=30)
    return result.stdout + result.stderr


def test_openvpn_reads_the_placeholder_profile(tmp_path):
    profile = client_profile()
    log = openvpn_reads(profile, tmp_path)
    assert f"UDPv4 link remote: [AF_INET]{PLACEHOLDER_REMOTE}:1194" in log, log
    assert "Options error" not in log and "Cannot load" not in log, log
    # The same run catches a broken key: the check can fail.
    start = profile.index("<key>\n-----BEGIN PRIVATE KEY-----\n") + 34
    broken = profile[:start] + "AAAA" + profile[start + 4:]
    assert "UDPv4 link remote" not in openvpn_reads(broken, tmp_path)
