"""Kubernetes distributions behind one interface (components/distributions/base.py): the
one `kubernetes.distribution` names is the only one the program knows."""

from components.distributions.base import Distribution
from components.distributions.k0s import K0s
from config.model import StackConfig

DISTRIBUTIONS = {"k0s": K0s}


def distribution_for(settings: StackConfig) -> Distribution:
    return DISTRIBUTIONS[settings.kubernetes.distribution](settings)
