"""Reads the stack config the way the Pulumi CLI hands it to the program, validates it
and returns a typed StackConfig, or raises ConfigError listing every problem."""

import difflib
import json
from collections.abc import Iterable, Mapping
from typing import Any, Optional

import pulumi
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from pydantic import TypeAdapter, ValidationError

from config.checks import cross_checks
from config.partial import PartialConfig
from config.model import PRIVATE_KEY_KEYS, SECRET_KEYS, Host, StackConfig, WorkerPool
from config.problems import NAMESPACE, ConfigError, Problem

_PRIVATE_KEY_MARKER = "PRIVATE KEY-----"


def load_from_pulumi() -> StackConfig:
    """Loads the current stack's config from the Pulumi runtime (CLI or mocks)."""
    runtime_config = pulumi.runtime.config
    raw = dict(runtime_config.get_config_env())
    raw.update(runtime_config.CONFIG.get())
    secret_keys = set(runtime_config.get_config_secret_keys_env())
    secret_keys |= {key for key in raw if runtime_config.is_config_secret(key)}
    return load(raw, secret_keys, stack=pulumi.get_stack())


def load(raw: Mapping[str, str], secret_keys: Iterable[str], stack: str) -> StackConfig:
    """`raw` maps full config keys (`gpu-cluster:hosts`) to the strings the CLI passes:
    scalars as text, objects and lists as JSON."""
    secret_keys = set(secret_keys)
    problems: list[Problem] = []
    values: dict[str, Any] = {}
    known = {field.alias for field in StackConfig.model_fields.values()}
    for full_key, text in raw.items():
        namespace, _, key = full_key.partition(":")
        if namespace != NAMESPACE:
            continue
        if key not in known:
            problems.append(Problem(key, _unknown_key_message(key, known)))
            continue
        if key in SECRET_KEYS and full_key not in secret_keys:
            problems.append(
                Problem(key, "must be a secret, but it is set in plain text; remove it and set it "
                        f"with `pulumi config set --secret {full_key}`")
            )
        try:
            values[key] = _decode(text)
        except ValueError as error:
            problems.append(Problem(key, str(error)))
    values.setdefault("clusterName", stack)
    for key in PRIVATE_KEY_KEYS:
        if key in values:
            problem = _private_key_problem(str(values[key]))
            if problem:
                problems.append(Problem(key, problem))

    try:
        settings = StackConfig.model_validate(values)
    except ValidationError as error:
        problems += _from_validation_error(error)
        problems += cross_checks(_salvage(values))
        raise ConfigError(problems) from None
    problems += cross_checks(_from_settings(settings))
    if problems:
        raise ConfigError(problems)
    return settings


def _private_key_problem(text: str) -> Optional[str]:
    if _PRIVATE_KEY_MARKER not in text:
        return ("is not a private key (expected a PEM or OpenSSH private key; was a public "
                "key given?)")
    data = text.encode()
    try:
        if b"OPENSSH PRIVATE KEY" in data:
            serialization.load_ssh_private_key(data, password=None)
        else:
            serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as error:
        # The message never quotes the key.
        reason = "it is encrypted" if "password" in str(error).lower() else "it does not parse"
        return f"cannot be used as an SSH key: {reason} (an unencrypted OpenSSH or PEM key is needed)"
    return None


def _decode(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            return json.loads(stripped)
        except json.JSONDecodeError as error:
            raise ValueError(f"is not valid structured config ({error.msg})") from None
    return text


def _unknown_key_message(key: str, known: set[str]) -> str:
    close = difflib.get_close_matches(key, sorted(known), n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return f"unknown key{hint}"


def _from_validation_error(error: ValidationError) -> list[Problem]:
    problems = []
    for item in error.errors(include_url=False):
        path = _path(item["loc"])
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "missing":
            message = "is required"
        elif item["type"] == "extra_forbidden":
            message = _unknown_nested_key(path)
        elif not any(path.startswith(key) for key in SECRET_KEYS):
            value = item.get("input")
            if isinstance(value, (str, int, float, bool)) and str(value) not in message:
                message += f" (got {_shown(value)})"
        problems.append(Problem(path, message))
    return problems


def _shown(value: object, limit: int = 80) -> str:
    """The value as the message quotes it; a long one (a PEM certificate) cut short."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit - 4]}...' ({len(str(value))} characters)"


def _unknown_nested_key(path: str) -> str:
    section, _, name = path.rpartition(".")
    if section == "storage":
        return f"unknown storage backend '{name}'; use nfs, efs or localPath"
    return "unknown key"


def _path(loc: tuple) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part == "[key]":
            path += " (the key)"
        else:
            path += f".{part}" if path else str(part)
    return path


def _salvage(values: dict[str, Any]) -> PartialConfig:
    """Parses each section on its own so cross checks can still run on the valid ones."""
    fields = {field.alias: field for field in StackConfig.model_fields.values()}

    def section(key: str):
        field = fields[key]
        if key not in values:
            return None if field.is_required() else field.get_default()
        try:
            return TypeAdapter(field.annotation).validate_python(values[key])
        except ValidationError:
            return None

    hosts: list[tuple[int, Host]] = []
    raw_hosts = values.get("hosts", [])
    raw_hosts = raw_hosts if isinstance(raw_hosts, list) else []
    for index, raw_host in enumerate(raw_hosts):
        try:
            hosts.append((index, Host.model_validate(raw_host)))
        except ValidationError:
            pass
    pools = []
    raw_pools = values.get("pools", [])
    for index, raw_pool in enumerate(raw_pools if isinstance(raw_pools, list) else []):
        try:
            pools.append((index, WorkerPool.model_validate(raw_pool)))
        except ValidationError:
            pass
    layout = values.get("layout")
    return PartialConfig(
        layout=layout if isinstance(layout, str) else None,
        network=section("network"),
        ssh=section("ssh"),
        tuning=section("tuning"),
        storage=section("storage"),
        aws=section("aws"),
        vpn=section("vpn"),
        pools=pools,
        has_aws="aws" in values,
        has_vpn="vpn" in values,
        hosts=hosts,
        all_hosts_parsed=len(hosts) == len(raw_hosts),
        has_ssh_private_key=bool(values.get("sshPrivateKey")),
        has_bastion_private_key=bool(values.get("bastionPrivateKey")),
        vpn_client_profile=str(values.get("vpnClientProfile") or ""),
        kubeflow=section("kubeflow"),
        has_kubeflow="kubeflow" in values,
        kubeflow_password=str(values.get("kubeflowPassword") or ""),
        kubeflow_tls_key=str(values.get("kubeflowTlsKey") or ""),
    )


def _from_settings(settings: StackConfig) -> PartialConfig:
    return PartialConfig(
        layout=settings.layout,
        network=settings.network,
        ssh=settings.ssh,
        tuning=settings.tuning,
        storage=settings.storage,
        aws=settings.aws,
        vpn=settings.vpn,
        pools=list(enumerate(settings.pools)),
        has_aws=settings.aws is not None,
        has_vpn=settings.vpn is not None,
        hosts=list(enumerate(settings.hosts)),
        has_ssh_private_key=settings.ssh_private_key is not None,
        has_bastion_private_key=settings.bastion_private_key is not None,
        vpn_client_profile=(settings.vpn_client_profile.get_secret_value()
                            if settings.vpn_client_profile else ""),
        kubeflow=settings.kubeflow,
        has_kubeflow=settings.kubeflow is not None,
        kubeflow_password=(settings.kubeflow_password.get_secret_value()
                           if settings.kubeflow_password else ""),
        kubeflow_tls_key=(settings.kubeflow_tls_key.get_secret_value()
                          if settings.kubeflow_tls_key else ""),
    )
