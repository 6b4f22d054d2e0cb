"""One bootstrap step on one host: a script file run over SSH as a remote.Command.

The scripts come from the step bundle the machine holds (components/common/bundle.py,
installed by its bundle step before any other). A step's stdin carries only what is its
own: its inputs as exports, and for each action the bundle files it runs with their
sha256 (`bundle_stdin`), which bundle/run-step.sh checks before it sources them. Inputs
never go on the command line or through SSH environment variables (those need AcceptEnv
and would show secrets in `ps`). The command itself is constant:
`sudo -n bash -s -- create|delete`. The doctor runs `check` on the steps that support it
(`python -m doctor --drift`): what create would change, changing nothing.

A changed input, or a change to a file the step runs (its script or a library it
sources), changes stdin, which Pulumi applies as an *update* that re-runs the step on that
host only; a change to any other file of the bundle leaves it alone. The provider's
`triggers` are deliberately not used: a trigger change *replaces* the command, which
would run its delete script (a node reset).

`render_envelope` renders a step whole, its scripts pasted in (the preview's build
folder, which the doctor sends as it is, and the commands that run where `pulumi up`
runs); `whole_text` turns a bundle stdin into that same text.
"""

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pulumi
from pulumi_command import remote
from pydantic import SecretStr

from components.common.bundle import Bundle, step_bundle
from config.model import Host, SshSettings

SCRIPTS_DIR = Path(__file__).parent.parent / "scripts"
# The check mode of steps (check/lib.sh) and their additions; SSH envelopes only.
CHECK_FOLDER = "check"


@dataclass(frozen=True)
class Script:
    """A script under components/scripts/ plus the libraries it sources."""

    path: str  # relative to components/scripts/, e.g. "k0s/join-worker.sh"
    # Libraries of other folders it sources too, after its own (e.g. "upgrade/lib.sh").
    extra_libraries: tuple[str, ...] = ()
    # Whether its envelope answers `check`: the script in check mode (check/lib.sh), then
    # its additions check/<name> when there are any. Only for scripts whose changes all
    # go through what check/lib.sh intercepts; any other script answers `unknown action`.
    checks: bool = False
    # Sources no library (bundle/receive.sh, which runs before the machine has any).
    standalone: bool = False

    @property
    def libraries(self) -> list[str]:
        if self.standalone:
            return []
        libraries = ["lib.sh"]
        folder = Path(self.path).parent
        if str(folder) != "." and (SCRIPTS_DIR / folder / "lib.sh").exists():
            libraries.append(str(folder / "lib.sh"))
        return libraries + list(self.extra_libraries)

    @property
    def files(self) -> list[str]:
        """What its create (or delete) runs, in order: its libraries, then itself."""
        return self.libraries + [self.path]

    @property
    def check_files(self) -> list[str]:
        """What its check runs: the script in check mode and its additions, after which
        check_result gives the verdict (exit 0 in sync, 3 drifted)."""
        additions = f"{CHECK_FOLDER}/{Path(self.path).name}"
        return (self.libraries + [f"{CHECK_FOLDER}/lib.sh", self.path]
                + ([additions] if (SCRIPTS_DIR / additions).exists() else []))

    def text(self) -> str:
        return "\n".join(read_script(path) for path in self.files)

    def check_text(self) -> str:
        """The body of gpu_cluster_check (the text of check_files, then check_result)."""
        return "\n".join([read_script(path) for path in self.check_files] + ["check_result"])


@dataclass(frozen=True)
class DataFile:
    """A file under components/scripts/ that steps get as an input, not as a script."""

    path: str

    def text(self) -> str:
        return read_script(self.path)


# Reads an SSM parameter with the instance's role on images without the AWS CLI; steps
# that read one get it as SSM_READER.
SSM_READER = DataFile("ssm-parameter.py")


def read_script(relative: str) -> str:
    """The text of a file under components/scripts/."""
    return _read_file(SCRIPTS_DIR / relative)


@functools.lru_cache(maxsize=None)
def _read_file(path: Path) -> str:
    # Each script is read once per run, not once per host.
    return path.read_text()


@dataclass(frozen=True)
class Endpoint:
    """Where and how to reach a machine when it is not as its host entry says: an EC2
    instance at its public address, with the host key it installs at boot, dialed for as
    long as its boot may take."""

    address: pulumi.Input[str]
    port: int
    host_key: pulumi.Input[str]
    wait_seconds: float


# The provider retries a failed dial 0.1 s after the first, each wait 1.5 times the one
# before, at most 5 s (pulumi-command provider/pkg/provider/remote/connection.go
# dialWithRetry; pulumi sdk/go/common/util/retry DefaultDelay/Backoff/MaxDelay).
_FIRST_RETRY_SECONDS, _BACKOFF, _MAX_RETRY_SECONDS = 0.1, 1.5, 5.0


def dial_attempts_for(seconds: float) -> int:
    """Dial attempts whose waits add up to at least `seconds` (more, as each dial that
    times out takes its own time too)."""
    attempts, waited, wait = 1, 0.0, _FIRST_RETRY_SECONDS
    while waited < seconds:
        waited += wait
        wait = min(wait * _BACKOFF, _MAX_RETRY_SECONDS)
        attempts += 1
    return attempts


@dataclass(frozen=True)
class SshAccess:
    """How the program logs in to hosts: gpu-cluster:ssh and the secret keys
    (sshPrivateKey, bastionPrivateKey; the bastion's defaults to the hosts')."""

    settings: SshSettings
    private_key: SecretStr
    bastion_private_key: Optional[SecretStr] = None


def connection_to(host: Host, access: SshAccess, endpoint: Optional[Endpoint] = None,
                  wait_seconds: float = 0) -> remote.ConnectionArgs:
    """SSH connection to a host, through the bastion when one is configured, or to
    `endpoint` directly; it keeps dialing for at least `wait_seconds` (a rebooting host)."""
    ssh = access.settings
    private_key = pulumi.Output.secret(access.private_key.get_secret_value())
    proxy = None
    if ssh.bastion is not None and endpoint is None:
        bastion_key = access.bastion_private_key or access.private_key
        proxy = remote.ProxyConnectionArgs(
            host=ssh.bastion.host,
            port=ssh.bastion.port,
            user=ssh.bastion.user or ssh.user,
            host_key=ssh.bastion.host_key,
            private_key=pulumi.Output.secret(bastion_key.get_secret_value()),
            dial_error_limit=ssh.dial_error_limit,
            per_dial_timeout=ssh.per_dial_timeout_seconds,
        )
    return remote.ConnectionArgs(
        host=endpoint.address if endpoint else host.ssh_address or host.address,
        port=endpoint.port if endpoint else ssh.port,
        user=host.ssh_user or ssh.user,
        host_key=endpoint.host_key if endpoint else host.ssh_host_key,
        private_key=private_key,
        proxy=proxy,
        dial_error_limit=max(ssh.dial_error_limit, dial_attempts_for(
            max(wait_seconds, endpoint.wait_seconds if endpoint else 0))),
        per_dial_timeout=ssh.per_dial_timeout_seconds,
    )


_HEADER = "# gpu-cluster step "
_SHELLCHECK_LITERAL_DOLLAR = "# shellcheck disable=SC2016"


def envelope(
    host: str,
    step: str,
    create: Script,
    env: Mapping[str, pulumi.Input[str]],
    delete: Optional[Script] = None,
    render=None,
) -> pulumi.Input[str]:
    """The stdin of a step: its inputs as exports, then what it runs wrapped in functions
    so bash has read all of stdin before any command runs (an apt-get reading stdin
    cannot swallow the rest of the script). `render`: render_envelope (the scripts
    pasted in, the default) or bundle_stdin."""
    render = render or render_envelope
    if all(isinstance(value, str) for value in env.values()):
        # The same text, without the Outputs an apply over plain values would make (most
        # host steps' inputs are plain: a large stack registers faster).
        return render(host, step, create, dict(env), delete)
    names = list(env.keys())
    return pulumi.Output.all(*env.values()).apply(
        lambda values: render(host, step, create, dict(zip(names, values)), delete))


def render_envelope(host: str, step: str, create: Script, env: Mapping[str, str],
                    delete: Optional[Script] = None) -> str:
    """The envelope's text, for inputs that are all known. A script that `checks` gets
    gpu_cluster_check and the `check` action here, never in boot user data (its size
    limit; a boot runs create only)."""
    # check/lib.sh redefines the lib.sh functions it intercepts, so their first
    # definitions in this function are never called.
    check = ["# shellcheck disable=SC2329", "gpu_cluster_check() {", create.check_text(),
             "}"] if create.checks else []
    return render_step_functions(host, step, create, env, delete) + "\n".join(
        check + _case_lines(_actions(create, delete))) + "\n"


def render_step_functions(host: str, step: str, create: Script, env: Mapping[str, str],
                          delete: Optional[Script] = None) -> str:
    """A step's inputs as exports and its scripts as the functions gpu_cluster_create (and
    gpu_cluster_delete), defined but not called."""
    lines = ["gpu_cluster_create() {", create.text(), "}"]
    if delete:
        lines += ["gpu_cluster_delete() {", delete.text(), "}"]
    return step_header(host, step, create, env, delete) + "\n".join(lines) + "\n"


def step_header(host: str, step: str, create: Script, env: Mapping[str, str],
                delete: Optional[Script] = None) -> str:
    """A step's header comment and its inputs as exports, each value single-quoted."""
    lines = [
        f"{_HEADER}'{_in_comment(step)}' on host '{_in_comment(host)}' ({create.path}"
        + (f", delete: {delete.path})" if delete else ")"),
    ]
    for name, value in {"GPU_CLUSTER_HOST": host, "GPU_CLUSTER_STEP": step, **env}.items():
        if "$" in str(value) and "\n" not in str(value):
            # A `$` in a value (a URN's parent types) is literal on purpose.
            lines.append(_SHELLCHECK_LITERAL_DOLLAR)
        lines.append(f"export {name}={_single_quoted(str(value))}")
    return "\n".join(lines) + "\n"


# One export line as render_step_functions writes it: inside the quotes every `'` is the
# escape `'\''`, so the value ends at the first `'` that is not one.
_EXPORT = re.compile(rf"(?:{_SHELLCHECK_LITERAL_DOLLAR}\n)?export (\w+)='([^']*(?:'\\''[^']*)*)'\n")


def step_inputs(text: str) -> dict[str, str]:
    """The exports of a step's envelope or boot part (GPU_CLUSTER_HOST, GPU_CLUSTER_STEP
    and its inputs), decoded: the inverse of render_step_functions. Only the block after
    the step's header is read, never an `export` in the scripts; {} without a header."""
    header = re.search(rf"^{_HEADER}.*\n", text, re.M)
    if header is None:
        return {}
    inputs, position = {}, header.end()
    while (line := _EXPORT.match(text, position)) is not None:
        inputs[line[1]] = line[2].replace("'\\''", "'")
        position = line.end()
    return inputs


# The runner every bundle stdin sources (bundle/run-step.sh), and the line that lists an
# action's files: 'ACTION PATH SHA256'.
RUNNER = "bundle/run-step.sh"
_FILE_LINE = re.compile(r"^  '(create|delete|check) ([a-z0-9._/-]+) ([0-9a-f]{64})'(?: \\)?$", re.M)
# Where the loader looks for the runner: the step's own copy (kept for its delete), the
# current bundle, then any bundle on the machine.
_LOADER = """\
gpu_cluster_step() {{
  local root="${{GPU_CLUSTER_ROOT:-}}/var/lib/gpu-cluster" runner="" candidate
  for candidate in "$root/steps/$GPU_CLUSTER_HOST/$GPU_CLUSTER_STEP" "$root/bundles/current" \\
    "$root"/bundles/*; do
    if [[ "$(sha256sum -- "$candidate/{runner}" 2>/dev/null | cut -c1-64)" == {sha} ]]; then
      runner="$candidate/{runner}"
      break
    fi
  done
  if [[ -z "$runner" ]]; then
    echo "gpu-cluster: $GPU_CLUSTER_HOST: $GPU_CLUSTER_STEP: refused: no step bundle on this" \\
      "host holds {runner} {sha}: the bundle step installs it before any other step" >&2
    exit 1
  fi
  # shellcheck source=/dev/null
  source "$runner"
  gpu_cluster_run_step "$1" \\
{files}
}}
gpu_cluster_step "${{1:-create}}"
"""


def _actions(create: Script, delete: Optional[Script]) -> dict[str, list[str]]:
    """The bundle files each action of a step runs, in order."""
    actions = {"create": create.files}
    if delete:
        actions["delete"] = delete.files
    if create.checks:
        actions["check"] = create.check_files
    return actions


def bundle_stdin(host: str, step: str, create: Script, env: Mapping[str, str],
                 delete: Optional[Script] = None, bundle: Optional[Bundle] = None) -> str:
    """A step's stdin when its machine holds the step bundle: its header and inputs as
    render_step_functions writes them, then the loader, which checks the runner's sha256,
    and the files of each action with theirs."""
    bundle = bundle or step_bundle()
    lines = [f"  '{action} {path} {bundle.sha256(path)}'"
             for action, paths in _actions(create, delete).items() for path in paths]
    return step_header(host, step, create, env, delete) + _LOADER.format(
        runner=RUNNER, sha=bundle.sha256(RUNNER), files=" \\\n".join(lines))


def whole_text(stdin: str, bundle: Optional[Bundle] = None) -> str:
    """A bundle stdin rendered whole, as render_envelope would have rendered the step: the
    files of each action pasted in. Any other text is returned as it is."""
    files = _FILE_LINE.findall(stdin[stdin.rfind("\ngpu_cluster_step() {\n"):])
    if not files:
        return stdin
    bundle = bundle or step_bundle()
    actions: dict[str, list[str]] = {}
    for action, path, _ in files:
        actions.setdefault(action, []).append(path)
    # The loader comes last: an input's value never reaches past it.
    header_end = stdin.rindex("\ngpu_cluster_step() {\n") + 1
    check = (["# shellcheck disable=SC2329", "gpu_cluster_check() {",
              *[bundle.text(path) for path in actions["check"]], "check_result", "}"]
             if "check" in actions else [])
    lines = [stdin[:header_end].rstrip("\n")]
    for action in ("create", "delete"):
        if action in actions:
            lines += [f"gpu_cluster_{action}() {{",
                      "\n".join(bundle.text(path) for path in actions[action]), "}"]
    return "\n".join(lines) + "\n" + "\n".join(check + _case_lines(actions)) + "\n"


def _case_lines(actions: Mapping[str, list[str]]) -> list[str]:
    return ['case "${1:-create}" in',
            *[f"  {action}) gpu_cluster_{action} </dev/null ;;"
              for action in ("create", "delete", "check") if action in actions],
            '  *) echo "gpu-cluster: unknown action: $1" >&2; exit 2 ;;',
            "esac"]


def _single_quoted(value: str) -> str:
    # Always quoted, so a value (or its redaction in the preview) is never word-split or globbed.
    return "'" + quoted_text(value) + "'"


def quoted_text(value: str) -> str:
    """`value` as it stands between the single quotes of an envelope's export: a ' closes
    the quotes, adds an escaped quote and opens them again."""
    return value.replace("'", "'\\''")


def _in_comment(value: str) -> str:
    # A line break or other control character would end the comment and run the rest:
    # the config refuses them, and here they are escaped regardless.
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in value)


def _command(host: str, step: str, action: str, user_hint: str) -> str:
    # Checked first so a missing sudo rule is reported as such, naming host and step. The
    # message is one quoted word whatever the names hold.
    message = _single_quoted(f"gpu-cluster: {host}: {step}: {user_hint} needs passwordless sudo")
    return (
        f"sudo -n true 2>/dev/null || {{ echo {message} >&2; exit 1; }}; "
        f"sudo -n bash -s -- {action}"
    )


def machine_env(host: Host) -> dict[str, str]:
    """MACHINE_GENERATION for every step of a host whose hardware was replaced
    (hosts[].generation): a changed input makes `pulumi up` run each step again, on the new
    machine, as an update. Not a replacement, whose delete would run on the old machine
    (gone, or answering with another host key) and fail on every `pulumi up` (pulumi-command
    issue #104)."""
    return {"MACHINE_GENERATION": str(host.generation)} if host.generation else {}


@dataclass(frozen=True)
class Ssh:
    """Where a step runs: an SSH connection, the user it logs in as, and the machine's
    bundle step, which every step run there waits for (components/hosts/bundle_step.py)."""

    connection: remote.ConnectionArgs
    user: str
    bundle: Optional[pulumi.Resource] = None


def run_step(
    about: str,
    step: str,
    *,
    on: Ssh,
    create: Script,
    env: Optional[Mapping[str, pulumi.Input[str]]] = None,
    delete: Optional[Script] = None,
    secret_stdout: bool = False,
    depends_on: Sequence[pulumi.Resource] = (),
    parent: pulumi.Resource,
) -> remote.Command:
    """`<about>-<step>`: runs `create` (and `delete` when the resource is destroyed).

    `about` names the machine (or pool) the step is about; `on` says where it runs (a
    worker's join token and node removal run on the controller)."""
    if on.bundle is None:
        raise ValueError(f"{about}-{step}: the machine it runs on has no bundle step")
    stdin = envelope(about, step, create, env or {}, delete, render=bundle_stdin)
    create_command = _command(about, step, "create", on.user)
    return remote.Command(
        f"{about}-{step}",
        connection=on.connection,
        create=create_command,
        update=create_command,
        delete=_command(about, step, "delete", on.user) if delete else None,
        stdin=stdin,
        add_previous_output_in_env=False,
        # Steps whose stdout is a credential log only their progress (stderr).
        logging=remote.Logging.STDERR if secret_stdout else remote.Logging.STDOUT_AND_STDERR,
        opts=pulumi.ResourceOptions(
            parent=parent,
            depends_on=[on.bundle, *depends_on],
            additional_secret_outputs=["stdout"] if secret_stdout else None,
        ),
    )
