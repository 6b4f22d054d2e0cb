"""Reads the stack config the way the Pulumi CLI hands it to the program, validates it
and returns a typed StackConfig, or raises ConfigError listing every problem."""

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Optional

import pulumi
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from pydantic import TypeAdapter, ValidationError

from config.checks import cross_checks
from config.messages import (QUOTE_LIMIT, cut, did_you_mean, finish, keys_at, namespace_typo,
                             required_message, set_secret_command, shown, string_leaves)
from config.model_base import without_field_names
from config.partial import PartialConfig
from config.model import PRIVATE_KEY_KEYS, SECRET_KEYS, Host, StackConfig, WorkerPool
from config.problems import NAMESPACE, ConfigError, Problem
from config.types import public_key_of
from contract.names import REDACTED

_PRIVATE_KEY_MARKER = "PRIVATE KEY-----"
_KEY_BLOCK_ONLY = re.compile(r"\s*-----BEGIN ([A-Z0-9 ]+)-----\r?\n[A-Za-z0-9+/=:,\s-]*?"
                             r"\r?\n-----END \1-----\s*")
# The most hosts and EC2 worker pools one stack holds: about the largest whose offline
# preview stays within benchmarks/preview_scale.py's goals (30 s, 1 GiB). Measured there:
# 500 hosts 13.6 s and 1022 MiB, 600 hosts 1179 MiB, 1,000 hosts 1860 MiB (memory is the
# limit); 200 pools 10.8 s and 343 MiB.
MAX_HOSTS = 500
MAX_POOLS = 200


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
            if namespace_typo(namespace):
                problems.append(Problem(cut(key), f"unknown namespace '{cut(namespace)}'; did "
                                        f"you mean '{NAMESPACE}:{cut(key)}'?",
                                        namespace=cut(namespace)))
            continue
        if key not in known:
            problems.append(Problem(key, _unknown_key_message(key, known)))
            continue
        if key in SECRET_KEYS and full_key not in secret_keys:
            problems.append(
                Problem(key, "must be a secret, but it is set in plain text; remove it and set it "
                        f"with `{set_secret_command(full_key)}`")
            )
        try:
            values[key] = _decode(text)
        except ValueError as error:
            problems.append(Problem(key, str(error)))
    values.setdefault("clusterName", stack)
    snake_keys, values = without_field_names(StackConfig, values)
    problems += [Problem(path, f"unknown key; did you mean '{key}'?") for path, key in snake_keys]
    for key in PRIVATE_KEY_KEYS:
        if key in values:
            problem = _private_key_problem(str(values[key]))
            if problem:
                problems.append(Problem(key, problem))
    # Before anything looks at the hosts one by one: a list far too long fails at once.
    over_limit = _over_limits(values)
    problems += over_limit
    checked = {key: value for key, value in values.items()
               if key not in {problem.path for problem in over_limit}}
    secret_paths = {key for key in values if f"{NAMESPACE}:{key}" in secret_keys}

    try:
        settings = StackConfig.model_validate(checked)
    except ValidationError as error:
        problems += _from_validation_error(error, secret_paths)
        settings = None
    if settings is None or over_limit:
        dropped: set[str] = set()
        partial = _salvage(checked, set(values) - set(checked), dropped)
        problems += [problem for problem in cross_checks(partial)
                     if not _speaks_of(problem, dropped)]
        raise ConfigError(finish(problems, values, secret_keys)) from None
    problems += cross_checks(_from_settings(settings))
    if problems:
        raise ConfigError(finish(problems, values, secret_keys))
    return settings


def _over_limits(values: dict[str, Any]) -> list[Problem]:
    problems = []
    for key, limit, fix in (("hosts", MAX_HOSTS, "split the cluster into several stacks"),
                            ("pools", MAX_POOLS, "use fewer, larger pools")):
        entries = values.get(key)
        if isinstance(entries, list) and len(entries) > limit:
            problems.append(Problem(key, f"lists {len(entries)} {key}; a stack holds at most "
                                    f"{limit} ({fix})"))
    return problems


def _private_key_problem(text: str) -> Optional[str]:
    if _PRIVATE_KEY_MARKER not in text:
        return ("is not a private key (expected a PEM or OpenSSH private key; was a public "
                "key given?)")
    if not _KEY_BLOCK_ONLY.fullmatch(text):
        # The key parser ignores what surrounds the block; nothing else may come with it.
        return "holds text before or after its key block; give the key alone"
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


def _public_key_or_nothing(private_key: Any) -> str:
    # A key that does not parse is reported by _private_key_problem.
    if not isinstance(private_key, str) or _private_key_problem(private_key) is not None:
        return ""
    return public_key_of(private_key)


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
    return f"unknown key{did_you_mean(key, known)}"


# A private key pasted where a public one belongs (an age identity in backup.recipients,
# a PEM key): a secret whatever its key, never quoted.
_PRIVATE_KEY_MARKERS = ("AGE-SECRET-KEY-", "PRIVATE KEY")


def _from_validation_error(error: ValidationError, secret_paths: set[str]) -> list[Problem]:
    problems = []
    for item in error.errors(include_url=False):
        path = _path(item["loc"])
        message = item["msg"].removeprefix("Value error, ")
        value = item.get("input")
        secret = (bool(item["loc"]) and str(item["loc"][0]) in secret_paths | set(SECRET_KEYS)
                  or any(marker in leaf.upper() for leaf in string_leaves(value)
                         for marker in _PRIVATE_KEY_MARKERS))
        if item["type"] == "missing":
            message = required_message(item["loc"])
        elif item["type"] == "extra_forbidden":
            message = _unknown_nested_key(item["loc"])
        elif secret:
            # A validator may quote the value, or a part of it: nothing quoted stays.
            message = re.sub(r"'[^']*'", REDACTED, message)
        else:
            if isinstance(value, (str, int, float, bool)) and str(value) not in message:
                message += f" (got {shown(value)})"
            if isinstance(value, bool) and item["type"] in _TEXT_ERRORS:
                message += _UNQUOTED_WORD
            # Validators quote the value whole; a long one is cut.
            for leaf in sorted(set(string_leaves(value)), key=len, reverse=True):
                if len(leaf) > QUOTE_LIMIT:
                    message = message.replace(leaf, cut(leaf))
        problems.append(Problem(path, message))
    return problems


# A YAML 1.1 reader (PyYAML, the offline preview's) takes an unquoted yes, no, on, off,
# true or false as a boolean (https://yaml.org/type/bool.html); where text was meant, the
# value arrives as one.
_TEXT_ERRORS = ("string_type", "literal_error", "enum")
_UNQUOTED_WORD = ("; an unquoted yes, no, on, off, true or false is read as a boolean: "
                  "quote the word (\"off\")")


def _unknown_nested_key(loc: tuple) -> str:
    name = str(loc[-1])
    known = keys_at(loc)
    if len(loc) == 2 and loc[0] == "storage":
        return (f"unknown storage backend '{cut(name)}'{did_you_mean(name, known)} (use nfs, "
                "efs or localPath)")
    return f"unknown key{did_you_mean(name, known)}"


def _path(loc: tuple) -> str:
    path = ""
    previous = None
    for part in loc:
        # A tagged union's tag (kubeflow.connectors[0]'s `oidc`) is no key of the file.
        tag = isinstance(previous, int) and part in UNION_TAGS
        previous = part
        if tag:
            continue
        if isinstance(part, int):
            path += f"[{part}]"
        elif part == "[key]":
            path += " (the key)"
        else:
            part = cut(str(part))
            path += f".{part}" if path else part
    return path


def _speaks_of(problem: Problem, dropped: set[str]) -> bool:
    """Whether `problem` is about a dropped key, or about a section holding one (with
    storage.efs dropped, "storage: configure a backend" is that key's doing)."""
    return any(problem.path == key or problem.path.startswith((f"{key}.", f"{key}["))
               or key.startswith(f"{problem.path}.") or key in problem.message
               for key in dropped)


def _salvage(values: dict[str, Any], unchecked: set[str], dropped: set[str]) -> PartialConfig:
    """Parses each section on its own so cross checks can still run on the valid ones;
    `unchecked` lists were not looked at (over their limit). A section with broken keys is
    parsed with those keys left at their defaults, added to `dropped` (the cross checks'
    problems about them are not shown: their own problem is): one unquoted `cni: off`
    does not hide the hosts' checks against network.lanCidr."""
    fields = {field.alias: field for field in StackConfig.model_fields.values()}

    def section(key: str):
        field = fields[key]
        if key not in values:
            return None if field.is_required() else field.get_default()
        adapter = TypeAdapter(field.annotation)
        try:
            return adapter.validate_python(values[key])
        except ValidationError as error:
            value = values[key]
            broken = {item["loc"][0] for item in error.errors()
                      if item["loc"] and isinstance(item["loc"][0], str)}
            if not isinstance(value, dict) or not broken:
                return None
            try:
                rest = adapter.validate_python({k: v for k, v in value.items() if k not in broken})
            except ValidationError:
                return None
            dropped.update(f"{key}.{name}" for name in broken)
            return rest

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
        nvidia=section("nvidia"),
        host_firewall=section("hostFirewall"),
        storage=section("storage"),
        aws=section("aws"),
        vpn=section("vpn"),
        pools=pools,
        has_aws="aws" in values,
        has_vpn="vpn" in values,
        hosts=hosts,
        all_hosts_parsed=len(hosts) == len(raw_hosts) and "hosts" not in unchecked,
        all_pools_parsed=len(pools) == len(raw_pools if isinstance(raw_pools, list) else [])
        and "pools" not in unchecked,
        has_ssh_private_key=bool(values.get("sshPrivateKey")),
        ssh_public_key=_public_key_or_nothing(values.get("sshPrivateKey")),
        has_bastion_private_key=bool(values.get("bastionPrivateKey")),
        vpn_client_profile=str(values.get("vpnClientProfile") or ""),
        kubeflow=section("kubeflow"),
        has_kubeflow="kubeflow" in values,
        kubeflow_password=str(values.get("kubeflowPassword") or ""),
        kubeflow_tls_key=str(values.get("kubeflowTlsKey") or ""),
        kubeflow_password_hashes=_string_map(values.get("kubeflowPasswordHashes")),
        kubeflow_connector_secrets=_string_map(values.get("kubeflowConnectorSecrets")),
        access=section("access"),
        backup=section("backup"),
        monitoring=section("monitoring"),
        kubernetes=section("kubernetes"),
        versions=section("versions"),
        images=section("images"),
        image_mirror_password=str(values.get("imageMirrorPassword") or ""),
    )


# The tags of the config's tagged unions (config/kubeflow_login.py Connector).
UNION_TAGS = ("oidc", "ldap")


def _string_map(value: Any) -> dict[str, str]:
    """A secret map's entries that are text (its own problems are reported by the model)."""
    if not isinstance(value, dict):
        return {}
    return {str(key): item for key, item in value.items() if isinstance(item, str)}


def _from_settings(settings: StackConfig) -> PartialConfig:
    return PartialConfig(
        layout=settings.layout,
        network=settings.network,
        ssh=settings.ssh,
        tuning=settings.tuning,
        nvidia=settings.nvidia,
        host_firewall=settings.host_firewall,
        storage=settings.storage,
        aws=settings.aws,
        vpn=settings.vpn,
        pools=list(enumerate(settings.pools)),
        has_aws=settings.aws is not None,
        has_vpn=settings.vpn is not None,
        hosts=list(enumerate(settings.hosts)),
        has_ssh_private_key=settings.ssh_private_key is not None,
        ssh_public_key=_public_key_or_nothing(
            settings.ssh_private_key.get_secret_value() if settings.ssh_private_key else None),
        has_bastion_private_key=settings.bastion_private_key is not None,
        vpn_client_profile=(settings.vpn_client_profile.get_secret_value()
                            if settings.vpn_client_profile else ""),
        kubeflow=settings.kubeflow,
        has_kubeflow=settings.kubeflow is not None,
        kubeflow_password=(settings.kubeflow_password.get_secret_value()
                           if settings.kubeflow_password else ""),
        kubeflow_tls_key=(settings.kubeflow_tls_key.get_secret_value()
                          if settings.kubeflow_tls_key else ""),
        kubeflow_password_hashes={name: value.get_secret_value() for name, value
                                  in (settings.kubeflow_password_hashes or {}).items()},
        kubeflow_connector_secrets={name: value.get_secret_value() for name, value
                                    in (settings.kubeflow_connector_secrets or {}).items()},
        access=settings.access,
        backup=settings.backup,
        monitoring=settings.monitoring,
        kubernetes=settings.kubernetes,
        versions=settings.versions,
        images=settings.images,
        image_mirror_password=(settings.image_mirror_password.get_secret_value()
                               if settings.image_mirror_password else ""),
    )
