"""mact: MolmoAct2 robot policies on CPUs, from Python (ctypes over libmact.so; numpy in and out).

    import mact
    policy = mact.Policy.from_pretrained("/models/so101")
    out = policy.predict_action(images=[top_rgb, wrist_rgb], task="Pick up the cube.", state=joints)
    out.actions      # float32 [1, n_action_steps, action_dim], robot units

For a control loop, mact.RealTimeRunner(policy, fps) returns one action per tick, with the next chunk inferred
on a background thread and joined to the current one by real-time chunking (predict_action's prev_actions).

The toolkits, over their own libraries (libmact_data.so, libmact_compress.so), each found as libmact is:
mact.datasets (open a LeRobot dataset, its info, features as numpy, frames as uint8 arrays), mact.stats (norm
statistics), mact.eval (the open-loop evaluation run and merge, the result as a dict), mact.prune (the ViT SNR
analysis, pruning, distill-eval, random checkpoints).

The library is found at an explicit ``library=`` path, $MACT_LIBRARY, the build tree (<repo>/build/libmact.so
when this package is imported from <repo>/python), or the system loader path (``mact.load_library``).
"""
from ._lib import HEADER_VERSION, Library, load_library
from .errors import (ClosedError, Error, FileError, FormatError, InputError, ModelError, NoMemoryError, Status,
                     UnsupportedError)
from .lerobot import LeRobotAdapter
from .policy import ActionOutput, ModelInfo, NormTag, Policy, Session
from .realtime import Inference, RealTimeRunner
from . import datasets, eval, prune, stats  # noqa: A004, E402 (mact.eval: the module, not the builtin)

from ._version import __version__  # noqa: E402

__all__ = ["Policy", "Session", "ActionOutput", "ModelInfo", "NormTag", "LeRobotAdapter", "RealTimeRunner",
           "Inference", "Library", "load_library", "Error", "Status", "ClosedError", "FileError", "FormatError",
           "InputError", "ModelError", "NoMemoryError", "UnsupportedError", "__version__"]
# the toolkit modules (datasets, stats, eval, prune) are attributes, not in __all__: a star import would shadow eval
