"""Kubernetes distributions behind one interface (components/distributions/base.py): the
one `kubernetes.distribution` names (config/versions.py DISTRIBUTIONS) is the only one the
program knows. Each lives in components/distributions/<name>.py as its DISTRIBUTION."""

import importlib

from components.distributions.base import Distribution
from config import versions
from config.model import StackConfig


def distribution_class(name: str) -> type:
    return importlib.import_module(f"components.distributions.{name}").DISTRIBUTION


DISTRIBUTIONS = {name: distribution_class(name) for name in versions.DISTRIBUTIONS}


def distribution_for(settings: StackConfig) -> Distribution:
    return DISTRIBUTIONS[settings.kubernetes.distribution](settings)
