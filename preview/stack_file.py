"""Turns Pulumi.yaml + Pulumi.<stack>.yaml into the config the CLI would hand the program:
PULUMI_CONFIG (key -> string; objects as JSON) and PULUMI_CONFIG_SECRET_KEYS.

Secure values cannot be decrypted here (no CLI, no passphrase or cloud KMS), so each one
gets an obvious placeholder, and the preview says so."""

import difflib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import yaml

from config.problems import NAMESPACE
from preview import credentials, entropy, vpn_placeholder, yaml_errors

# The project's example stacks: what the tests, the policy run and the benchmarks read. A
# user's own Pulumi.<stack>.yaml beside them previews like any stack but is in none of
# them, so a stack being written cannot break `make test`.
EXAMPLE_STACKS = ("dev", "lab", "prod", "rke2")

# Secrets every stack needs; a stack file without them still previews, with placeholders.
REQUIRED_SECRETS = ("sshPrivateKey",)

# Placeholders for secrets the offline preview cannot decrypt: private keys are real
# throwaway keys (the program derives the EC2 key pair from the SSH key); others are text.
_PLACEHOLDERS = {
    "sshPrivateKey": credentials.ssh_private_key,
    "bastionPrivateKey": credentials.ssh_private_key,
    "vpnClientProfile": vpn_placeholder.client_profile,
    # Each entry's (kubeflowPasswordHashes.<user>): a bcrypt hash, as the config requires.
    "kubeflowPasswordHashes": credentials.password_hash,
}


class StackFileError(ValueError):
    """A project or stack file that is not YAML, or not shaped like one Pulumi reads;
    the message names the file (and the line and column where YAML says)."""


@dataclass
class StackConfigFile:
    project: str
    stack: str
    config: dict[str, str]
    secret_keys: list[str]
    # Encrypted in the stack file: a placeholder stands in (and `pulumi up` decrypts it).
    placeholders: list[str] = field(default_factory=list)
    # Not in the stack file at all: a placeholder stands in, but `pulumi up` refuses.
    missing: list[str] = field(default_factory=list)


_STACK_FILE = re.compile(r"Pulumi\.(?P<stack>.+)\.ya?ml")


def stack_name(argument: str, project_dir: Path) -> str:
    """The stack an argument names: a stack's name, or its file (`Pulumi.towers.yaml`,
    `./Pulumi.towers.yaml`) in the project folder, the one place Pulumi reads it from."""
    path = Path(argument)
    match = _STACK_FILE.fullmatch(path.name)
    if match is None:
        if "/" in argument:
            raise StackFileError(f"{argument}: give a stack's name (prod) or its file "
                                 "(Pulumi.prod.yaml)")
        return argument
    folder = (Path.cwd() / path).resolve().parent
    if folder != project_dir.resolve():
        raise StackFileError(f"{argument}: Pulumi reads a stack's file from the project "
                             f"folder {project_dir} only; move it there and give its name "
                             f"({match['stack']})")
    return match["stack"]


def read_stack(project_dir: Path, stack: str) -> StackConfigFile:
    project = _mapping(_yaml(project_dir / "Pulumi.yaml"), "Pulumi.yaml")
    if not isinstance(project.get("name"), str) or not project["name"]:
        raise StackFileError("Pulumi.yaml: `name` must be the project's name (a string)")
    path = project_dir / f"Pulumi.{stack}.yaml"
    if not path.exists():
        # The names only, for the suggestion: no stack file but the one asked for is read
        # (tools and tests go through EXAMPLE_STACKS).
        stacks = [match["stack"] for match in map(_STACK_FILE.fullmatch, os.listdir(project_dir))
                  if match]
        close = difflib.get_close_matches(stack, sorted(stacks), n=1)
        hint = (f"; did you mean '{close[0]}'?" if close else
                f" (stacks here: {', '.join(sorted(stacks)) or 'none'})")
        raise FileNotFoundError(f"no stack file {path.name} in {project_dir}{hint}")
    document = _mapping(_yaml(path) or {}, path.name)
    _stack_file_keys(document, path.name)
    result = StackConfigFile(project=project["name"], stack=stack, config={}, secret_keys=[])
    project_config = project.get("config") or {}
    for key, spec in _mapping(project_config, "Pulumi.yaml", "config").items():
        if isinstance(spec, dict) and "default" in spec:
            _set(result, _full_key(key, project["name"], "Pulumi.yaml"), spec["default"])
    stack_config = _mapping(document.get("config") or {}, path.name, "config")
    for key, value in stack_config.items():
        _set(result, _full_key(key, project["name"], path.name), value)
    required = list(REQUIRED_SECRETS)
    if _kubeflow(result).get("user") is not None:
        required.append("kubeflowPassword")
    if _vpn_mode(result) == "client-to-existing":
        required.append("vpnClientProfile")
    for name in required:
        key = f"{NAMESPACE}:{name}"
        if key not in result.config:
            _set(result, key, {"secure": "missing"})
            result.placeholders.remove(key)
            result.missing.append(key)
    _stand_in_for_the_tls_key(result)
    _stand_in_for_password_hashes(result)
    return result


# libyaml's parser where PyYAML was built with it: some twenty times faster on a stack file.
_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _yaml(path: Path) -> Any:
    try:
        return yaml.load(path.read_text(), Loader=_FAST_LOADER)
    except (yaml.YAMLError, UnicodeDecodeError):
        pass  # PyYAML's own parser names the problem more plainly: read again for it.
    try:
        return yaml.safe_load(path.read_text())
    except yaml.MarkedYAMLError as error:
        if error.problem_mark is None and error.context_mark is None:
            raise StackFileError(f"{path.name}: not valid YAML: {error}") from None
        raise StackFileError(f"{path.name}, {yaml_errors.describe(error, path.read_text())}"
                             ) from None
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise StackFileError(f"{path.name}: not valid YAML: {error}") from None


# The top-level keys of a stack file (the Automation API's StackSettings, pulumi/pulumi-dotnet
# sdk/Pulumi.Automation/StackSettings.cs: secretsprovider, encryptedkey, encryptionsalt,
# config; `environment` names Pulumi ESC environments, README "Secrets and credentials with
# Pulumi ESC").
STACK_FILE_KEYS = ("secretsprovider", "encryptedkey", "encryptionsalt", "config", "environment")


def _stack_file_keys(document: dict, file: str) -> None:
    """Config keys written at the top level, without `config:` above them, are read by
    nobody: say so instead of asking for keys that are there."""
    stray = [str(key) for key in document if key not in STACK_FILE_KEYS]
    if not stray:
        return
    shown = ", ".join(stray[:3]) + (", ..." if len(stray) > 3 else "")
    if "config" not in document:
        raise StackFileError(f"{file}: has no `config:` section: its keys ({shown}) must be "
                             "indented under a first line `config:`")
    raise StackFileError(f"{file}: {shown} {'is not a key' if len(stray) == 1 else 'are not keys'}"
                         " of a stack file (those are " + ", ".join(STACK_FILE_KEYS) +
                         "); a config key goes under `config:`, indented like the others")


def _mapping(value: Any, file: str, key: Optional[str] = None) -> dict:
    if not isinstance(value, dict):
        where = f"`{key}`" if key else "the file"
        raise StackFileError(f"{file}: {where} must be a mapping of keys to values, not "
                             f"{_kind(value)}")
    return value


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "empty"
    return f"a single value ({type(value).__name__})"


def _kubeflow(result: StackConfigFile) -> dict:
    try:
        value = json.loads(result.config.get(f"{NAMESPACE}:kubeflow", "{}"))
    except ValueError:
        return {}  # the config check reports what is wrong with it
    return value if isinstance(value, dict) else {}


def _stand_in_for_password_hashes(result: StackConfigFile) -> None:
    """With Kubeflow and no connectors, each access.users entry with an email needs its
    hash (kubeflowPasswordHashes.<name>): a stack file without it previews with a
    placeholder hash, listed as missing."""
    kubeflow = _kubeflow(result)
    if f"{NAMESPACE}:kubeflow" not in result.config or kubeflow.get("connectors"):
        return
    try:
        access = json.loads(result.config.get(f"{NAMESPACE}:access", "{}"))
        users = [u for u in access.get("users", []) if isinstance(u, dict) and u.get("email")]
        key = f"{NAMESPACE}:kubeflowPasswordHashes"
        hashes = json.loads(result.config[key]) if key in result.config else {}
    except (ValueError, AttributeError, TypeError):
        return  # the config check reports what is wrong with it
    if not isinstance(hashes, dict):
        return
    missing = [str(u.get("name")) for u in users if u.get("name") not in hashes]
    for name in missing:
        hashes[name] = credentials.password_hash(entropy.stream(f"placeholder:{key}.{name}"))
        result.missing.append(f"{key}.{name}")
    if missing:
        result.config[key] = json.dumps(hashes)
        if key not in result.secret_keys:
            result.secret_keys.append(key)


def _vpn_mode(result: StackConfigFile) -> Any:
    try:
        return json.loads(result.config.get(f"{NAMESPACE}:vpn", "{}")).get("mode")
    except (ValueError, AttributeError):
        return None  # the config check reports what is wrong with it


def _stand_in_for_the_tls_key(result: StackConfigFile) -> None:
    """Kubeflow's certificate key cannot be decrypted offline, and a placeholder is not
    the certificate's key: the preview pairs a throwaway key with a copy of the
    certificate (same names and dates) and lists both as placeholders."""
    key_name, section_name = f"{NAMESPACE}:kubeflowTlsKey", f"{NAMESPACE}:kubeflow"
    if key_name not in result.placeholders or section_name not in result.config:
        return
    try:
        section = json.loads(result.config[section_name])
        tls = section["access"]["tls"]
        chain, key = credentials.stand_in_for_certificate(tls["certificate"],
                                                          entropy.stream(f"placeholder:{key_name}"))
    except (ValueError, KeyError, TypeError):
        return  # the config check reports what is wrong with it
    tls["certificate"] = chain
    result.config[section_name] = _json(section)
    result.config[key_name] = key
    result.placeholders.append(f"{section_name}.access.tls.certificate (a copy signed by "
                               "the stand-in key)")


def _full_key(key: Any, project: str, file: str) -> str:
    if not isinstance(key, str):
        raise StackFileError(f"{file}: config key {key!r} must be a string like "
                             f"{NAMESPACE}:layout")
    return key if ":" in key else f"{project}:{key}"


def _set(result: StackConfigFile, key: str, value: Any) -> None:
    value, secret = _reveal(key, value, result.placeholders)
    if secret and key not in result.secret_keys:
        result.secret_keys.append(key)
    result.config[key] = value if isinstance(value, str) else _json(value)


def _reveal(key: str, value: Any, placeholders: list[str]) -> tuple[Any, bool]:
    """Replaces `secure:` values (at any depth) with placeholders."""
    if isinstance(value, dict) and set(value) == {"secure"}:
        placeholders.append(key)
        name = key.split(":", 1)[1] if key.startswith(f"{NAMESPACE}:") else key
        make = _PLACEHOLDERS.get(name.split(".", 1)[0] if name.startswith(
            "kubeflowPasswordHashes.") else name)
        return (make(entropy.stream(f"placeholder:{key}")) if make
                else f"offline-preview-placeholder-for-{key}"), True
    if isinstance(value, dict):
        pairs = {k: _reveal(f"{key}.{k}", v, placeholders) for k, v in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(s for _, s in pairs.values())
    if isinstance(value, list):
        items = [_reveal(f"{key}[{i}]", v, placeholders) for i, v in enumerate(value)]
        return [v for v, _ in items], any(s for _, s in items)
    return value, False


def _json(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value)
