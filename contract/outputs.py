"""Stack outputs, from the Pulumi CLI (through the Automation API when the SDK is
installed) or from a JSON export of `pulumi stack output --json --show-secrets`."""

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from contract import ContractError, InputError
from contract.names import (
    ADMIN_KUBECONFIG_OUTPUT,
    ADMIN_VPN_PROFILE_OUTPUT,
    REDACTED,
    USER_KUBECONFIG_PARAMETERS_OUTPUT,
    USER_KUBECONFIGS_OUTPUT,
    USER_VPN_PROFILES_OUTPUT,
)

NO_VPN = ("only hybrid stacks with vpn.mode server-on-ec2 export VPN profiles; other "
          "layouts reach the API without one")
CLI_TIMEOUT_SECONDS = 300


@dataclass
class StackOutputs:
    values: dict[str, Any]
    # Names the source in messages: "stack 'prod'", "outputs file 'x.json'".
    source: str

    def require(self, name: str) -> Any:
        if name not in self.values:
            known = ", ".join(sorted(self.values)) or "none"
            raise InputError(f"{self.source} has no output '{name}' (its outputs: {known})")
        value = self.values[name]
        if value == REDACTED:
            raise InputError(
                f"output '{name}' of {self.source} is redacted ('{REDACTED}'): export the "
                "outputs with `pulumi stack output --json --show-secrets`")
        return value

    def users(self) -> dict[str, str]:
        """User name -> kubeconfig YAML, from `userKubeconfigs`."""
        return self._per_user(USER_KUBECONFIGS_OUTPUT, "kubeconfig")

    def _per_user(self, name: str, what: str) -> dict[str, str]:
        value = _decoded(self.require(name))
        if not isinstance(value, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise InputError(f"output '{name}' of {self.source} is not an object of "
                             f"user name -> {what}")
        redacted = sorted(user for user, text in value.items() if text == REDACTED)
        if redacted:
            raise InputError(
                f"output '{name}' of {self.source} is redacted for "
                f"{', '.join(redacted)}: export with `pulumi stack output --json --show-secrets`")
        return value

    def _for_user(self, name: str, what: str, user: str, known_as: str) -> str:
        """`user`'s value in the per-user output `name`; `known_as` names the users listed
        when `user` is not one of them."""
        values = self._per_user(name, what)
        if user not in values:
            known = ", ".join(sorted(values)) or "none"
            raise InputError(f"no user '{user}' in output '{name}' of {self.source}; "
                             f"{known_as}: {known}")
        return values[user]

    def _string(self, name: str) -> str:
        value = self.require(name)
        if not isinstance(value, str):
            raise InputError(f"output '{name}' of {self.source} is not a string")
        return value

    def _vpn_output(self, name: str) -> None:
        if name not in self.values:
            raise InputError(f"{self.source} has no output '{name}': {NO_VPN}")

    def user_kubeconfig(self, user: str) -> str:
        return self._for_user(USER_KUBECONFIGS_OUTPUT, "kubeconfig", user, "known users")

    def admin_kubeconfig(self) -> str:
        return self._string(ADMIN_KUBECONFIG_OUTPUT)

    def user_vpn_profile(self, user: str) -> str:
        """The user's OpenVPN profile (.ovpn text), from `userVpnProfiles`."""
        self._vpn_output(USER_VPN_PROFILES_OUTPUT)
        return self._for_user(USER_VPN_PROFILES_OUTPUT, "OpenVPN profile", user,
                              "users with a VPN profile")

    def admin_vpn_profile(self) -> str:
        self._vpn_output(ADMIN_VPN_PROFILE_OUTPUT)
        return self._string(ADMIN_VPN_PROFILE_OUTPUT)

    def parameters(self) -> dict[str, str]:
        """User name -> SSM parameter name (AWS layouts); empty when the output is absent."""
        value = _decoded(self.values.get(USER_KUBECONFIG_PARAMETERS_OUTPUT) or {})
        if not isinstance(value, dict):
            raise InputError(f"output '{USER_KUBECONFIG_PARAMETERS_OUTPUT}' of {self.source} "
                             "is not an object")
        return {str(k): str(v) for k, v in value.items()}


def _decoded(value: Any) -> Any:
    """An object in the export; tolerated as a JSON string, as a stringified output reads
    (None when it is not JSON)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def from_file(path: str) -> StackOutputs:
    """A JSON export; `-` reads standard input."""
    if path == "-":
        source, text = "the outputs on standard input", sys.stdin.read()
    else:
        source = f"outputs file '{path}'"
        try:
            text = Path(path).read_text()
        except FileNotFoundError:
            raise InputError(f"{source} does not exist") from None
        except (OSError, UnicodeDecodeError) as error:
            raise InputError(f"cannot read {source}: {_reason(error)}") from None
    return _parse(text, source)


def from_stack(stack: str, cwd: Optional[str]) -> StackOutputs:
    """The outputs of a stack, secrets shown, read in `cwd` (the Pulumi project folder):
    through the Automation API when the SDK is installed, else by running
    `pulumi stack output --json --show-secrets`. Either needs the CLI."""
    source = f"stack '{stack}'"
    export = f"pulumi stack output --json --show-secrets --stack {stack} > outputs.json"
    pulumi = shutil.which("pulumi")
    if pulumi is None:
        raise InputError(
            "the Pulumi CLI (pulumi) is not on PATH: install it, or export the outputs where "
            f"it is (`{export}`) and pass --outputs outputs.json (or - for standard input)")
    if cwd is not None and not Path(cwd).is_dir():
        raise InputError(f"--cwd '{cwd}' is not a directory")
    try:
        from pulumi import automation
    except ImportError:
        # Run without the program's dependencies (the doctor can be).
        return _from_cli(pulumi, stack, cwd, source)
    return _from_automation(automation, stack, cwd or os.getcwd(), source)


def _from_automation(automation: Any, stack: str, cwd: str, source: str) -> StackOutputs:
    """`LocalWorkspace.stack_outputs`: the CLI's `pulumi version`, then `pulumi
    --non-interactive stack output --json [--show-secrets] --stack NAME` in `cwd`
    (pulumi/automation/_cmd.py PulumiCommand.__init__ and run, _local_workspace.py
    stack_outputs in SDK 3.272.0). Not `select_stack`: it runs `pulumi stack select`, which
    would change the stack the user's next `pulumi up` works on."""
    try:
        workspace = automation.LocalWorkspace(
            work_dir=cwd, env_vars={"PULUMI_SKIP_UPDATE_CHECK": "true"})
        found = workspace.stack_outputs(stack)
    except automation.errors.CommandError as error:
        # str(CommandResult): " code: N\n stdout: ...\n stderr: ..." (_cmd.py CommandResult).
        stderr = str(error).split("\n stderr: ", 1)[-1]
        raise ContractError(f"`pulumi stack output` failed for {source}: "
                              f"{_cli_error(stderr, 'no error message')}") from None
    except automation.errors.InvalidVersionError as error:
        raise ContractError(f"the Pulumi CLI cannot serve the Automation API: {error}"
                              ) from None
    except (ValueError, KeyError, TypeError):
        # The SDK's json.loads of what the CLI printed; the text holds secrets.
        raise ContractError(f"`pulumi stack output` for {source} did not print a JSON "
                              "object of outputs") from None
    except subprocess.CalledProcessError as error:
        raise ContractError(f"`pulumi version` failed (exit code {error.returncode})"
                              ) from None
    except OSError as error:
        raise ContractError(f"cannot run pulumi: {_reason(error)}") from None
    return StackOutputs({name: output.value for name, output in found.items()}, source)


def _from_cli(pulumi: str, stack: str, cwd: Optional[str], source: str) -> StackOutputs:
    command = [pulumi, "stack", "output", "--json", "--show-secrets", "--non-interactive",
               "--stack", stack]
    env = {**os.environ, "PULUMI_SKIP_UPDATE_CHECK": "true"}
    try:
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=CLI_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        raise ContractError(f"`pulumi stack output` for {source} did not finish in "
                              f"{CLI_TIMEOUT_SECONDS} s") from None
    except OSError as error:
        raise ContractError(f"cannot run {pulumi}: {_reason(error)}") from None
    if done.returncode != 0:
        raise ContractError(f"`pulumi stack output` failed for {source}: "
                              f"{_cli_error(done.stderr, f'exit code {done.returncode}')}")
    return _parse(done.stdout, source)


def _cli_error(stderr: str, default: str) -> str:
    """The CLI's own error line (no stack, not logged in, passphrase needed)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    reason = next((line for line in lines if line.startswith("error:")),
                  lines[-1] if lines else default)
    return reason[:300]


def _parse(text: str, source: str) -> StackOutputs:
    try:
        values = json.loads(text)
    except json.JSONDecodeError as error:
        # The position only: the text holds secrets.
        raise InputError(f"{source} is not JSON (line {error.lineno}, column {error.colno}); "
                         "expected the output of `pulumi stack output --json --show-secrets`"
                         ) from None
    if not isinstance(values, dict):
        raise InputError(f"{source} is not a JSON object of stack outputs")
    return StackOutputs(values, source)


def _reason(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return type(error).__name__
