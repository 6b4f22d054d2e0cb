"""Typed stack configuration: models, validation and pinned upstream versions."""

from config.loader import load, load_from_pulumi
from config.hosts import Host
from config.model import StackConfig
from config.problems import ConfigError, Problem

__all__ = ["ConfigError", "Host", "Problem", "StackConfig", "load", "load_from_pulumi"]
