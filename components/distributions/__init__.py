"""Kubernetes distributions behind one small boundary (k0s today)."""

from components.distributions.k0s import K0s
from config.model import StackConfig


def distribution_for(settings: StackConfig) -> K0s:
    if settings.kubernetes.distribution == "k0s":
        return K0s(settings)
    raise ValueError(f"unsupported distribution {settings.kubernetes.distribution}")
