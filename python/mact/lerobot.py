"""A LeRobot-style adapter: ``reset()`` and ``select_action(observation)`` over an action-chunk queue, so a
LeRobot control loop can drive a mact.Policy. LeRobot itself is not needed (nor PyTorch: tensors are read
through ``.detach().cpu().numpy()`` when they have it, anything else through numpy)."""
import collections

import numpy as np

from .errors import input_error

IMAGE_PREFIX = "observation.images."


def _numpy(x):
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # a torch tensor, without importing torch
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def _image(x, key):
    """A LeRobot image -> HxWx3 uint8: HWC uint8 as a robot gives it, or CxHxW / HxWxC float in [0, 1] as
    LeRobot's datasets and preprocessors give it; a leading batch of 1 dropped. Floats become bytes as libmact
    does it for a float .npy frame (`mact run --image`): the float32 product x * 255 truncated, clamped to
    [0, 255], NaN -> 0."""
    a = _numpy(x)
    if a.ndim == 4:
        if a.shape[0] != 1:
            raise input_error(f"{key}: a batch of {a.shape[0]} images; mact runs one observation at a time")
        a = a[0]
    if a.ndim == 3 and a.shape[0] == 3 and a.shape[2] != 3:
        a = np.transpose(a, (1, 2, 0))
    if a.dtype.kind == "f":
        v = a.astype(np.float32) * np.float32(255.0)
        with np.errstate(invalid="ignore"):
            a = np.where(v > 0, np.minimum(v, np.float32(255.0)), np.float32(0.0)).astype(np.uint8)
    return a


class LeRobotAdapter:
    """LeRobot's policy interface over a mact.Policy.

    ``select_action(observation)`` returns the next action of the current chunk, predicting a new chunk when
    the queue is empty; ``reset()`` empties the queue (call it at the start of each episode).

    observation: a LeRobot observation dict: ``observation.images.<camera>`` (HxWx3 uint8, or CxHxW float in
    [0, 1], converted as libmact converts a float frame; a leading batch of 1 allowed), ``observation.state`` (raw robot units, [state_dim] or [1,
    state_dim]) and ``task`` (a str, or a list of one str; else the ``task`` given here).

    camera_keys: the observation keys of the cameras in the checkpoint's camera order (full keys or just the
    camera names); None: the norm tag's camera_keys from norm_stats.json. n_action_steps: actions executed
    per chunk; None: the norm tag's n_action_steps (else the horizon). seed: None: every chunk from the
    library's default seed; an int s: chunk k (counted from reset()) from seed s + k. Other keyword arguments
    (num_steps, ...) go to predict_action.

    real_time: None: the plain queue above (each chunk predicted when the last is used up, the loop waiting
    for it). A dict of mact.RealTimeRunner's keyword arguments, with ``fps`` (e.g. ``{"fps": 30,
    "queue_threshold": 5}``): select_action() is then the runner's step(): the next chunk is inferred on a
    background thread while the current one runs and joined to it by real-time chunking (``runner``; call
    close() at the end).

    The action: float32 [1, action_dim] when observation.state has a batch dimension, else [action_dim]."""

    def __init__(self, policy, camera_keys=None, norm_tag=None, n_action_steps=None, task=None, seed=None,
                 real_time=None, **predict_kwargs):
        self.policy = policy
        self.norm_tag = norm_tag
        keys = policy.camera_keys(norm_tag) if camera_keys is None else camera_keys
        if isinstance(keys, str) or not keys:
            raise input_error("camera_keys: a list of the camera observation keys in the checkpoint's camera "
                              "order is needed (its norm_stats.json lists none)")
        self.camera_keys = [k if k.startswith(IMAGE_PREFIX) else IMAGE_PREFIX + k for k in keys]
        self.n_action_steps = n_action_steps
        self.task = task
        self.seed = seed
        self.predict_kwargs = predict_kwargs
        self._queue = collections.deque()
        self._chunks = 0
        self.last_output = None
        self.runner = None
        if real_time is not None:
            from .realtime import RealTimeRunner
            rt = dict(real_time)
            if "fps" not in rt:
                raise input_error("real_time: a dict of RealTimeRunner's arguments with \"fps\" (the control rate)")
            self.runner = RealTimeRunner(policy, rt.pop("fps"), norm_tag=norm_tag, n_action_steps=n_action_steps,
                                         seed=seed, **predict_kwargs, **rt)

    def reset(self):
        self._queue.clear()
        self._chunks = 0
        if self.runner is not None:
            self.runner.reset()

    def close(self):
        """Stops the real-time runner's thread (nothing to do without one). Idempotent."""
        if self.runner is not None:
            self.runner.close()

    def _inputs(self, observation):
        """A LeRobot observation -> (images, state, task) as predict_action takes them."""
        missing = [k for k in self.camera_keys + ["observation.state"] if k not in observation]
        if missing:
            raise input_error(f"observation lacks {', '.join(missing)} (has {', '.join(map(str, observation))})")
        images = [_image(observation[k], k) for k in self.camera_keys]
        state = _numpy(observation["observation.state"])
        task = observation.get("task", self.task)
        if isinstance(task, (list, tuple)):
            if len(task) != 1:
                raise input_error(f"task: a batch of {len(task)}; mact runs one observation at a time")
            task = task[0]
        if task is None:
            raise input_error("no task: the observation has no \"task\" and none was given to the adapter")
        return images, state, task

    def predict_chunk(self, observation):
        """One predict_action on a LeRobot observation -> mact.ActionOutput (the queue untouched)."""
        images, state, task = self._inputs(observation)
        seed = None if self.seed is None else self.seed + self._chunks
        out = self.policy.predict_action(images=images, task=task, state=state, norm_tag=self.norm_tag,
                                         n_action_steps=self.n_action_steps, seed=seed, **self.predict_kwargs)
        self._chunks += 1
        self.last_output = out
        return out

    def select_action(self, observation):
        batched = _numpy(observation.get("observation.state", [])).ndim == 2
        if self.runner is not None:
            row = self.runner.step(*self._inputs(observation))
            return row[None] if batched else row
        if not self._queue:
            self._queue.extend(self.predict_chunk(observation).actions[0])
        row = self._queue.popleft()
        return row[None] if batched else row

    @property
    def queued(self):
        """Actions left in the current chunk."""
        return self.runner.queued if self.runner is not None else len(self._queue)
