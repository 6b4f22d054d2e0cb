"""How config problems read: unknown keys with the nearest known one, host and pool entries
named by their names, values cut short, and nothing of a secret quoted."""

import difflib
import re
import types
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal, Optional, Union, get_args, get_origin

from pydantic import BaseModel, TypeAdapter, ValidationError

from config.model import SECRET_KEYS, StackConfig
from config.problems import NAMESPACE, Problem
from config.types import DnsLabel
from contract.names import REDACTED

# Values longer than this are cut where a message quotes them.
QUOTE_LIMIT = 80
# Secret strings shorter than this are left in messages: replacing a word like "udp"
# everywhere would garble them, and a secret that short is no secret.
_MIN_SCRUBBED = 4
_NAMED_LISTS = ("hosts", "pools")
_NAME = TypeAdapter(DnsLabel)


def shown(value: object, limit: int = QUOTE_LIMIT) -> str:
    """The value as the message quotes it; a long one (a PEM certificate) cut short."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit - 4]}...' ({len(str(value))} characters)"


def cut(text: str, limit: int = QUOTE_LIMIT) -> str:
    """`text` as a message embeds it: a long one cut, saying how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit - 20]}... ({len(text)} characters)"


def did_you_mean(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def namespace_typo(namespace: str) -> bool:
    """Whether a config key's namespace looks like a misspelling of the project's:
    `gpu-clustr`, `gpu_cluster`, `GPU-Cluster`. Other namespaces (aws, pulumi,
    kubernetes) are other programs' config and are left alone."""
    if namespace == NAMESPACE:
        return False
    squashed = re.sub(r"[-_.\s]", "", namespace.lower())
    if squashed == NAMESPACE.replace("-", ""):
        return True
    # 0.8: one or two letters dropped, doubled or swapped in the 11 of "gpu-cluster";
    # "gpu-operator" (0.52) or "kubernetes" stay well below.
    return bool(difflib.get_close_matches(namespace.lower(), [NAMESPACE], n=1, cutoff=0.8))


# What a secret is set from, where it is a file (`pulumi config set` reads stdin).
SECRET_SOURCES = {"sshPrivateKey": "~/.ssh/id_ed25519", "bastionPrivateKey": "bastion_key",
                  "vpnClientProfile": "profile.ovpn", "kubeflowTlsKey": "key.pem"}
# A map's entries whose value a command makes: a Kubeflow login's bcrypt hash (Dex reads
# bcrypt; htpasswd -B writes ":$2y$..." for an empty name).
MAP_SECRET_VALUES = {"kubeflowPasswordHashes": "\"$(htpasswd -nBC 12 '' | tr -d ':\\n')\""}


def set_secret_command(full_key: str) -> str:
    """The command that sets a secret key: `pulumi config set --secret KEY < FILE` where
    its value is a file, with --path for an entry of a map (`kubeflowPasswordHashes.ada`)."""
    key = full_key.partition(":")[2] or full_key
    if "." in key:
        value = MAP_SECRET_VALUES.get(key.partition(".")[0])
        return f"pulumi config set --secret --path '{NAMESPACE}:{key}'" + (
            f" {value}" if value else "")
    source = SECRET_SOURCES.get(key)
    return f"pulumi config set --secret {NAMESPACE}:{key}" + (f" < {source}" if source else "")


def required_message(loc: tuple) -> str:
    """`is required`, with the values or keys it takes."""
    annotation = _annotation_at(loc)
    if get_origin(annotation) is Literal:
        *first, last = [str(value) for value in get_args(annotation)]
        return "is required: " + (f"{', '.join(first)} or {last}" if first else last)
    keys = keys_at(tuple(loc) + ("",))
    if keys:
        return f"is required: a section with one or more of {', '.join(keys)}"
    return "is required"


def _annotation_at(loc: tuple) -> Any:
    """The type of the key at `loc`, inside Optional and Annotated (None if unknown)."""
    annotation: Any = StackConfig
    for part in loc:
        annotation = _bare(annotation)
        if _is_model(annotation):
            field = next((f for name, f in annotation.model_fields.items()
                          if part in (name, f.alias)), None)
            if field is None:
                return None
            annotation = field.annotation
        elif get_origin(annotation) in (list, dict):
            annotation = get_args(annotation)[-1]
        else:
            return None
    return _bare(annotation)


def keys_at(loc: tuple) -> list[str]:
    """The keys the config section holding `loc`'s last part accepts (empty when the
    section is not a model, e.g. a map of labels)."""
    annotation: Any = StackConfig
    for part in loc[:-1]:
        annotation = _bare(annotation)
        if _is_model(annotation):
            field = next((f for name, f in annotation.model_fields.items()
                          if part in (name, f.alias)), None)
            if field is None:
                return []
            annotation = field.annotation
        elif get_origin(annotation) in (list, dict):
            annotation = get_args(annotation)[-1]
        else:
            return []
    annotation = _bare(annotation)
    if not _is_model(annotation):
        return []
    return [field.alias or name for name, field in annotation.model_fields.items()]


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _bare(annotation: Any) -> Any:
    """The model or container inside Optional[...] and Annotated[...]."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            inner = [a for a in get_args(annotation)
                     if _is_model(a) or get_origin(a) in (list, dict)]
            if not inner:
                return annotation
            annotation = inner[0]
        else:
            return annotation


def string_leaves(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [leaf for item in value.values() for leaf in string_leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in string_leaves(item)]
    return []


def finish(problems: list[Problem], values: Mapping[str, Any],
           secret_keys: set[str]) -> list[Problem]:
    """The problems as they are shown: without the text of any secret key's value (a
    `secure:` value inside an object makes the whole key secret, so none of its strings
    is quoted), hosts and pools named."""
    secrets = sorted({leaf for key, value in values.items()
                      if f"{NAMESPACE}:{key}" in secret_keys or key in SECRET_KEYS
                      for leaf in string_leaves(value) if len(leaf) >= _MIN_SCRUBBED},
                     key=len, reverse=True)
    names = {kind: _EntryNames(values.get(kind)) for kind in _NAMED_LISTS}
    finished = []
    for problem in problems:
        message = problem.message
        for secret in secrets:
            message = message.replace(secret, REDACTED)
        finished.append(Problem(_named(problem.path, names), _named_references(message, names),
                                namespace=problem.namespace))
    return finished


class _EntryNames:
    """The names of a list's entries, each looked up when a problem needs it (a list over
    its limit is not gone through)."""

    def __init__(self, entries: Any):
        self._entries = entries if isinstance(entries, list) else []

    def get(self, index: int) -> Optional[str]:
        entry = self._entries[index] if index < len(self._entries) else None
        name = entry.get("name") if isinstance(entry, Mapping) else None
        try:
            return _NAME.validate_python(name) if isinstance(name, str) else None
        except ValidationError:
            return None  # not a usable name: its own problem says so


_ENTRY = re.compile(r"^(hosts|pools)\[(\d+)\]")
_REFERENCE = re.compile(rf"{NAMESPACE}:(hosts|pools)\[(\d+)\](?! \()")


def _named(path: str, names: dict[str, "_EntryNames"]) -> str:
    """`hosts[2].address` -> `hosts[2] (gpu-03).address`: the index stays, for tools and
    order, the name is what people look for."""
    return _ENTRY.sub(lambda m: _with_name(m, names), path, count=1)


def _named_references(message: str, names: dict[str, "_EntryNames"]) -> str:
    return _REFERENCE.sub(lambda m: f"{NAMESPACE}:{_with_name(m, names)}", message)


def _with_name(match: re.Match, names: dict[str, "_EntryNames"]) -> str:
    kind, index = match.group(1), int(match.group(2))
    name = names[kind].get(index)
    return f"{kind}[{index}] ({name})" if name else f"{kind}[{index}]"
