"""LeRobot's lerobot.configs.types, the two names its payload classes use."""
from dataclasses import dataclass
from enum import Enum


class FeatureType(str, Enum):
    STATE = "STATE"
    VISUAL = "VISUAL"
    ENV = "ENV"
    ACTION = "ACTION"
    REWARD = "REWARD"
    LANGUAGE = "LANGUAGE"


@dataclass
class PolicyFeature:
    type: FeatureType
    shape: tuple
