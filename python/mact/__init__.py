"""mact: MolmoAct2 robot policies on CPUs, from Python (ctypes over libmact.so; numpy in and out).

    import mact
    policy = mact.Policy.from_pretrained("/models/so101")
    out = policy.predict_action(images=[top_rgb, wrist_rgb], task="Pick up the cube.", state=joints)
    out.actions      # float32 [1, n_action_steps, action_dim], robot units

For a control loop, mact.RealTimeRunner(policy, fps) returns one action per tick, with the next chunk inferred
on a background thread and joined to the current one by real-time chunking (predict_action's prev_actions).

The library is found at an explicit ``library=`` path, $MACT_LIBRARY, the build tree (<repo>/build/libmact.so
when this package is imported from <repo>/python), or the system loader path (``mact.load_library``).
"""
from ._lib import HEADER_VERSION, Library, load_library
from .errors import (ClosedError, Error, FileError, FormatError, InputError, ModelError, NoMemoryError, Status,
                     UnsupportedError)
from .lerobot import LeRobotAdapter
from .policy import ActionOutput, ModelInfo, NormTag, Policy, Session
from .realtime import Inference, RealTimeRunner

__version__ = ".".join(map(str, HEADER_VERSION))

__all__ = ["Policy", "Session", "ActionOutput", "ModelInfo", "NormTag", "LeRobotAdapter", "RealTimeRunner",
           "Inference", "Library", "load_library", "Error", "Status", "ClosedError", "FileError", "FormatError",
           "InputError", "ModelError", "NoMemoryError", "UnsupportedError", "__version__"]
