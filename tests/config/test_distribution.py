"""kubernetes.distribution picks the release form kubernetes.version must have (and its
default), and what the distribution cannot change (RKE2's API port)."""

import pytest

import config
from config import versions
from tests.builders import as_cli_config
from tests.config.test_input_rules import BASES, _problems, _set, assert_accepted, assert_refused_at


def _rke2(*changes):
    def change(values: dict) -> None:
        values.setdefault("kubernetes", {})["distribution"] = "rke2"
        for each in changes:
            each(values)
    return change


REFUSED = [
    ("a k0s version with rke2", "bare-metal",
     _rke2(_set("kubernetes", "version", versions.K0S)), "kubernetes.version",
     f"is not a rke2 release version like {versions.RKE2}"),
    ("an rke2 version with k0s", "bare-metal", _set("kubernetes", "version", versions.RKE2),
     "kubernetes.version", f"is not a k0s release version like {versions.K0S}"),
    ("an rke2 version with text after it", "hybrid",
     _rke2(_set("kubernetes", "version", "v1.36.3+rke2r1-custom")), "kubernetes.version",
     "is not a rke2 release version"),
    ("an rke2 version without its v", "cloud",
     _rke2(_set("kubernetes", "version", "1.36.3+rke2r1")), "kubernetes.version",
     "is not a rke2 release version"),
    ("another API port with rke2", "bare-metal", _rke2(_set("kubernetes", "apiPort", 6444)),
     "kubernetes.apiPort", "must be 6443 with distribution rke2"),
    ("another API port with rke2 on cloud", "cloud",
     _rke2(_set("kubernetes", "apiPort", 443)), "kubernetes.apiPort", "must be 6443"),
    ("a distribution the program does not know", "bare-metal",
     _set("kubernetes", "distribution", "k3s"), "kubernetes.distribution", "'k0s' or 'rke2'"),
]


@pytest.mark.parametrize("layout, change, path, fragment", [row[1:] for row in REFUSED],
                         ids=[row[0] for row in REFUSED])
def test_refused_at_its_key(layout, change, path, fragment):
    assert_refused_at(layout, change, path, fragment)


def test_both_rke2_problems_at_once():
    values = BASES["bare-metal"]()
    _rke2(_set("kubernetes", "version", versions.K0S),
          _set("kubernetes", "apiPort", 6444))(values)
    paths = {problem.path for problem in _problems(values)}
    assert {"kubernetes.version", "kubernetes.apiPort"} <= paths


ACCEPTED = [
    # A version without a pinned sha256 comes with its own (config/release_pins.py).
    ("rke2 release candidate", "bare-metal",
     _rke2(_set("kubernetes", "version", "v1.37.0-rc1+rke2r1"),
           _set("versions", "releaseSha256", {"amd64": "0123456789abcdef" * 4}))),
    ("rke2 on hybrid with its API port", "hybrid", _rke2(_set("kubernetes", "apiPort", 6443))),
    ("rke2 on cloud", "cloud", _rke2()),
    ("k0s with another API port", "bare-metal", _set("kubernetes", "apiPort", 6444)),
]


@pytest.mark.parametrize("layout, change", [row[1:] for row in ACCEPTED],
                         ids=[row[0] for row in ACCEPTED])
def test_accepted(layout, change):
    assert_accepted(layout, change)


@pytest.mark.parametrize("distribution, pin", [("k0s", versions.K0S), ("rke2", versions.RKE2)])
def test_version_defaults_to_the_distributions_pin(distribution, pin):
    values = BASES["bare-metal"]()
    values.setdefault("kubernetes", {})["distribution"] = distribution
    values["kubernetes"].pop("version", None)
    cli = as_cli_config(values)
    settings = config.load(cli.config, cli.secret_keys, "test")
    assert settings.kubernetes.version == pin
