"""Kubernetes distributions behind one interface (components/distributions/base.py): the
one `kubernetes.distribution` names is the only one the program knows."""

from components.distributions.base import Distribution
from components.distributions.k0s import K0s
from components.distributions.rke2 import Rke2
from config.model import StackConfig

DISTRIBUTIONS = {"k0s": K0s, "rke2": Rke2}


def distribution_for(settings: StackConfig) -> Distribution:
    return DISTRIBUTIONS[settings.kubernetes.distribution](settings)
