"""The one-context kubeconfig the program hands out (the admin's in the stack output
`kubeconfig`, each user's in `userKubeconfigs`), parsed and checked for its shape."""

from dataclasses import dataclass
from typing import Any

import yaml

from contract import InputError

SECTIONS = {"clusters": "cluster", "users": "user", "contexts": "context"}


@dataclass
class Handout:
    """A kubeconfig with one cluster, one user and one context."""
    document: dict
    cluster_name: str
    user_name: str
    context_name: str

    def entry(self, section: str) -> dict:
        return self.document[section][0]

    @property
    def server(self) -> str:
        return self.entry("clusters")["cluster"]["server"]

    def dump(self) -> str:
        return dump(self.document)


def load_yaml(text: str, what: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        # The position only: PyYAML's message quotes the offending line, which may hold keys.
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise InputError(f"{what} is not valid YAML{where}") from None


def dump(document: dict) -> str:
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=False)


def parse_handout(text: str, what: str) -> Handout:
    """The program's kubeconfig: one cluster, one user, one context referring to both."""
    document = load_yaml(text, what)
    if not isinstance(document, dict):
        raise InputError(f"{what} is not a kubeconfig")
    names = {}
    for section, body_key in SECTIONS.items():
        entries = document.get(section)
        if (not isinstance(entries, list) or len(entries) != 1 or not isinstance(entries[0], dict)
                or not isinstance(entries[0].get("name"), str)
                or not isinstance(entries[0].get(body_key), dict)):
            raise InputError(f"{what} is not a kubeconfig with exactly one cluster, one user "
                             f"and one context (see '{section}')")
        names[section] = entries[0]["name"]
    context = document["contexts"][0]["context"]
    if (context.get("cluster"), context.get("user")) != (names["clusters"], names["users"]):
        raise InputError(f"{what}: context '{names['contexts']}' does not refer to its cluster "
                         f"'{names['clusters']}' and user '{names['users']}'")
    if not isinstance(document["clusters"][0]["cluster"].get("server"), str):
        raise InputError(f"{what}: cluster '{names['clusters']}' has no server")
    document.setdefault("apiVersion", "v1")
    document.setdefault("kind", "Config")
    document["current-context"] = names["contexts"]
    return Handout(document, names["clusters"], names["users"], names["contexts"])
