"""Turns Pulumi.yaml + Pulumi.<stack>.yaml into the config the CLI would hand the program:
PULUMI_CONFIG (key -> string; objects as JSON) and PULUMI_CONFIG_SECRET_KEYS.

Secure values cannot be decrypted here (no CLI, no passphrase or cloud KMS), so each one
gets an obvious placeholder, and the preview says so."""

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from config.problems import NAMESPACE
from preview import credentials

# Secrets every stack needs; a stack file without them still previews, with placeholders.
REQUIRED_SECRETS = ("sshPrivateKey",)

# Placeholders for secrets the offline preview cannot decrypt: private keys are real
# throwaway keys (the program derives the EC2 key pair from the SSH key); others are text.
_PLACEHOLDERS = {
    "sshPrivateKey": credentials.ssh_private_key,
    "bastionPrivateKey": credentials.ssh_private_key,
}


@dataclass
class StackConfigFile:
    project: str
    stack: str
    config: dict[str, str]
    secret_keys: list[str]
    placeholders: list[str] = field(default_factory=list)


def read_stack(project_dir: Path, stack: str) -> StackConfigFile:
    project = yaml.safe_load((project_dir / "Pulumi.yaml").read_text())
    path = project_dir / f"Pulumi.{stack}.yaml"
    if not path.exists():
        raise FileNotFoundError(f"no stack file {path.name} in {project_dir}")
    document = yaml.safe_load(path.read_text()) or {}
    result = StackConfigFile(project=project["name"], stack=stack, config={}, secret_keys=[])
    for key, spec in (project.get("config") or {}).items():
        if isinstance(spec, dict) and "default" in spec:
            _set(result, _full_key(key, project["name"]), spec["default"])
    for key, value in (document.get("config") or {}).items():
        _set(result, _full_key(key, project["name"]), value)
    required = list(REQUIRED_SECRETS)
    if f"{NAMESPACE}:kubeflow" in result.config:
        required.append("kubeflowPassword")
    for name in required:
        key = f"{NAMESPACE}:{name}"
        if key not in result.config:
            _set(result, key, {"secure": "missing"})
    _stand_in_for_the_tls_key(result)
    return result


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
        chain, key = credentials.stand_in_for_certificate(tls["certificate"])
    except (ValueError, KeyError, TypeError):
        return  # the config check reports what is wrong with it
    tls["certificate"] = chain
    result.config[section_name] = _json(section)
    result.config[key_name] = key
    result.placeholders.append(f"{section_name}.access.tls.certificate (a copy signed by "
                               "the stand-in key)")


def _full_key(key: str, project: str) -> str:
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
        make = _PLACEHOLDERS.get(name)
        return (make() if make else f"offline-preview-placeholder-for-{key}"), True
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
