"""The payload classes of LeRobot's async inference (lerobot.async_inference.helpers), fields as LeRobot's."""
from dataclasses import dataclass, field
from typing import Any

from lerobot.configs.types import PolicyFeature  # noqa: F401  (as in LeRobot's helpers.py)


@dataclass
class TimedData:
    timestamp: float
    timestep: int

    def get_timestamp(self):
        return self.timestamp

    def get_timestep(self):
        return self.timestep


@dataclass
class TimedAction(TimedData):
    action: Any

    def get_action(self):
        return self.action


@dataclass
class TimedObservation(TimedData):
    observation: dict
    must_go: bool = False

    def get_observation(self):
        return self.observation


@dataclass
class RemotePolicyConfig:
    policy_type: str
    pretrained_name_or_path: str
    lerobot_features: dict
    actions_per_chunk: int
    device: str = "cpu"
    rename_map: dict = field(default_factory=dict)
