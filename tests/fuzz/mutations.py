"""Hypothesis strategies that break the example stacks' config the ways users and attackers
do: wrong types, missing keys, bad addresses, overlapping networks, huge lists and strings,
unknown keys, unicode, broken JSON, secrets set in plain text, hostile text (a trailing
newline, shell and YAML syntax, control characters), booleans for numbers, snake_case
keys and a misspelt namespace. Each works on the config as the CLI
hands it to the program (full key -> string, objects as JSON)."""

import copy
import json
import re
from dataclasses import replace

from hypothesis import strategies as st

from preview.stack_file import EXAMPLE_STACKS, StackConfigFile, read_stack
from tests.builders import PROJECT_DIR

STACKS = list(EXAMPLE_STACKS)
_CIDR = re.compile(r"^\d+\.\d+\.\d+\.\d+/\d+$")
_IP = re.compile(r"^\d+\.\d+\.\d+\.\d+$")

BAD_ADDRESSES = [
    "300.1.2.3", "10.0.0.0/33", "10.0.0.1/24", "::1", "fe80::/64", "1.2.3", " 10.0.0.1",
    "10.0.0.1 ", "0.0.0.0/0", "255.255.255.255", "127.0.0.1", "0.0.0.0", "10.0.0.0/0",
    "10.0.0.256/24", "0x0a000001", "010.000.000.001", "\uff11\uff10.0.0.1", "10.0.0.1\n",
    "192.168.10.0/24", "10.20.0.0/16", "224.0.0.1", "169.254.169.254", "", "example.com",
    "-1", "1e3", "a" * 300,
]
WIDE_NETWORKS = ["0.0.0.0/0", "10.0.0.0/8", "192.168.0.0/16", "10.20.0.0/15", "10.244.0.0/17"]
WRONG_TYPES = [0, -1, 1.5, 10 ** 30, True, False, None, "", "text", [], {}, ["a"], {"x": 1},
               [None], {"": ""}]
# Drawn as copies: a later mutation may change them in place.
WRONG_TYPE = st.sampled_from(WRONG_TYPES).map(copy.deepcopy)
UNICODE = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
# What a value may carry to break out of the script, unit or manifest it is rendered into;
# {} is the value it replaces (YAML's `key: |` adds the trailing newline).
HOSTILE = ["{}\n", "{}\n$(touch /tmp/pwned)", "$(touch /tmp/pwned)", "{}'; touch /tmp/pwned; '",
           "{}`id`", "{}\x00", "\x1b[31m{}", "{}\r", "{} --privileged", "{}\u2028x",
           "{}\ttab", '{}"', "{}\\", "{}%n", "{}: [", "{}#"]


def cli_values(stack: str) -> tuple:
    """(values, secret keys) of an example stack: full key -> parsed value."""
    stack_file = read_stack(PROJECT_DIR, stack)
    values = {}
    for key, text in stack_file.config.items():
        stripped = text.strip()
        values[key] = json.loads(stripped) if stripped[:1] in "[{" else text
    return values, list(stack_file.secret_keys)


BASES = {stack: cli_values(stack) for stack in STACKS}


def as_stack_file(stack: str, values: dict, secret_keys: list) -> StackConfigFile:
    config = {key: value if isinstance(value, str) else json.dumps(value)
              for key, value in values.items()}
    # Its own stack name: the build folder the program writes (Kubeflow's overlays) is
    # not the example stack's, which other tests read at the same time.
    return replace(read_stack(PROJECT_DIR, stack), stack=f"fuzz-{stack}", config=config,
                   secret_keys=[k for k in secret_keys if k in config], placeholders=[])


def paths(document, prefix=()) -> list:
    """Every path into the document (keys and list indexes), containers included."""
    found = []
    items = (document.items() if isinstance(document, dict)
             else enumerate(document) if isinstance(document, list) else [])
    for key, value in items:
        found.append(prefix + (key,))
        found += paths(value, prefix + (key,))
    return found


def _parent(document, path):
    for key in path[:-1]:
        document = document[key]
    return document


def _leaves(values, pattern=None) -> list:
    return [p for p in paths(values) if isinstance(_get(values, p), str)
            and (pattern is None or pattern.match(_get(values, p)))]


def _get(document, path):
    for key in path:
        document = document[key]
    return document


@st.composite
def _set_at(draw, values, candidates, new_value):
    if not candidates:
        return
    path = draw(st.sampled_from(sorted(candidates, key=repr)))
    _parent(values, path)[path[-1]] = draw(new_value)


@st.composite
def mutation(draw, values: dict, secret_keys: list):
    """Applies one mutation to `values` (in place); returns its name for the report."""
    kind = draw(st.sampled_from(["wrong type", "missing key", "bad address", "overlap",
                                 "huge list", "huge string", "unknown key", "unicode",
                                 "broken json", "plaintext secret", "duplicate entry",
                                 "hostile text", "bool for number", "snake_case key",
                                 "misspelt namespace"]))
    every = paths(values)
    if kind == "wrong type":
        draw(_set_at(values, every, WRONG_TYPE))
    elif kind == "missing key" and every:
        path = draw(st.sampled_from(sorted(every, key=repr)))
        del _parent(values, path)[path[-1]]
    elif kind == "bad address":
        draw(_set_at(values, _leaves(values, _IP) + _leaves(values, _CIDR),
                     st.sampled_from(BAD_ADDRESSES)))
    elif kind == "overlap":
        cidrs = _leaves(values, _CIDR)
        others = [_get(values, p) for p in cidrs]
        draw(_set_at(values, cidrs, st.sampled_from(others + WIDE_NETWORKS)))
    elif kind in ("huge list", "duplicate entry"):
        lists = [p for p in every if isinstance(_get(values, p), list) and _get(values, p)]
        if lists:
            path = draw(st.sampled_from(sorted(lists, key=repr)))
            items = _get(values, path)
            count = draw(st.integers(50, 400)) if kind == "huge list" else 2
            items.extend(copy.deepcopy(items[i % len(items)]) for i in range(count))
            if kind == "huge list" and all(isinstance(i, dict) and "name" in i for i in items):
                for index, item in enumerate(items):  # distinct names, so more gets checked
                    item["name"] = f"n{index}"
    elif kind == "huge string":
        draw(_set_at(values, _leaves(values), st.sampled_from(["x" * 5000, "a-" * 3000,
                                                                "1" * 400, "/" * 2000])))
    elif kind == "unknown key":
        dicts = [p for p in every if isinstance(_get(values, p), dict)]
        target = _get(values, draw(st.sampled_from(sorted(dicts, key=repr)))) if dicts else values
        key = draw(st.one_of(UNICODE, st.sampled_from(["gpu-cluster:tunning", "hosts ", "Hosts",
                                                       "gpu-cluster:", ""])))
        target[key if target is not values or ":" in key else f"gpu-cluster:{key}"] = \
            draw(WRONG_TYPE)
    elif kind == "unicode":
        draw(_set_at(values, _leaves(values), UNICODE))
    elif kind == "broken json":
        top = [k for k, v in values.items() if not isinstance(v, str)]
        if top:
            key = draw(st.sampled_from(sorted(top)))
            text = json.dumps(values[key])
            cut = draw(st.integers(0, max(len(text) - 1, 0)))
            values[key] = draw(st.sampled_from([text[:cut], "{" + text, text + "}", "[" + text,
                                                "{lanCidr: }", "null", "[]", "{}"]))
    elif kind == "plaintext secret" and secret_keys:
        secret_keys.remove(draw(st.sampled_from(sorted(secret_keys))))
    elif kind == "hostile text":
        leaves = _leaves(values)
        if leaves:
            path = draw(st.sampled_from(sorted(leaves, key=repr)))
            template = draw(st.sampled_from(HOSTILE))
            _parent(values, path)[path[-1]] = template.replace("{}", _get(values, path))
    elif kind == "bool for number":
        numbers = [p for p in every if type(_get(values, p)) is int]
        draw(_set_at(values, numbers, st.sampled_from([True, False, "true", "4.0", 4.5])))
    elif kind == "snake_case key":
        keyed = [p for p in every if isinstance(p[-1], str) and re.search("[a-z][A-Z]", p[-1])
                 and isinstance(_parent(values, p), dict)]
        if keyed:
            path = draw(st.sampled_from(sorted(keyed, key=repr)))
            parent = _parent(values, path)
            parent[re.sub("([a-z])([A-Z])", r"\1_\2", path[-1]).lower()] = parent.pop(path[-1])
    elif kind == "misspelt namespace":
        key = draw(st.sampled_from(sorted(values)))
        namespace = draw(st.sampled_from(["gpu-clustr", "gpu_cluster", "GPU-Cluster",
                                          "gpucluster", "gpu-clusters"]))
        values[f"{namespace}:{key.partition(':')[2]}"] = values.pop(key)
    return kind


@st.composite
def broken_stack(draw, max_mutations: int = 3):
    """(stack, mutated values, secret keys, mutation names)."""
    stack = draw(st.sampled_from(STACKS))
    values, secret_keys = copy.deepcopy(BASES[stack])
    kinds = [draw(mutation(values, secret_keys))
             for _ in range(draw(st.integers(1, max_mutations)))]
    return stack, values, secret_keys, kinds
