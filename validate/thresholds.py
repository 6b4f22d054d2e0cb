"""The NCCL floors of validate/thresholds.yaml, each with its source."""

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import yaml

from validate import ValidateError

PATH = Path(__file__).with_name("thresholds.yaml")


@dataclass(frozen=True)
class Floor:
    name: str
    gpu_model: str
    gpus: int
    min_busbw_gbps: float
    source: str

    def matches(self, models: list[str], gpus: int) -> bool:
        return gpus == self.gpus and any(
            re.search(self.gpu_model, model, re.IGNORECASE) for model in models if model)


@dataclass(frozen=True)
class Thresholds:
    single_node: tuple[Floor, ...]
    link_fraction: float
    link_fraction_source: str

    def single(self, models: list[str], gpus: int) -> Optional[Floor]:
        return next((f for f in self.single_node if f.matches(models, gpus)), None)


def load(path: Path = PATH) -> Thresholds:
    try:
        document = yaml.safe_load(path.read_text())
        floors = []
        for index, entry in enumerate(document.get("single_node") or []):
            missing = [key for key in ("name", "gpu_model", "gpus", "min_busbw_gbps", "source")
                       if not entry.get(key)]
            if missing:
                raise ValidateError(f"{path.name}: single_node[{index}] lacks "
                                    f"{', '.join(missing)}")
            re.compile(entry["gpu_model"])
            floors.append(Floor(str(entry["name"]), str(entry["gpu_model"]), int(entry["gpus"]),
                                float(entry["min_busbw_gbps"]), str(entry["source"])))
        socket = document["socket"]
        fraction = float(socket["link_fraction"])
        if not 0 < fraction <= 1 or not socket.get("source"):
            raise ValidateError(f"{path.name}: socket.link_fraction must be in (0, 1] with a "
                                "source")
        return Thresholds(tuple(floors), fraction, str(socket["source"]))
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError, AttributeError,
            re.error) as error:
        raise ValidateError(f"{path.name} cannot be read: {type(error).__name__}: {error}")
