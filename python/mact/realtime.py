"""mact.RealTimeRunner: a control loop's action source with real-time chunking (RTC) and inference off the loop.

    with mact.RealTimeRunner(policy, fps=30, task="Pick up the cube.") as runner:
        while True:                                   # once per control tick, at 30 Hz
            action = runner.step(images=[top, wrist], state=joints)   # float32 [action_dim], robot units
            robot.send(action)

Each tick returns one row of the current chunk. When the queue of rows not executed yet falls to
``queue_threshold``, the next inference starts on a background thread from the latest observation, with those
rows as ``prev_actions`` and an ``inference_delay`` d estimated from recent latencies; the robot keeps executing
the old rows meanwhile. When the new chunk arrives, the rows the robot executed during the inference (c of them,
counted in ticks) are in the past: the queue becomes the new chunk's rows [c, n), and the old chunk's rest is
dropped. RTC guided the new chunk's rows [0, d) to equal the old ones, so the join is smooth when c <= d.

What LeRobot PR #4454 got wrong, done here as the paper means it:
(a) the delay passed is never more than the rows given (d <= len(prev_actions), and below the horizon);
(b) prev_actions are exactly the unexecuted rows left, never padded (zero rows would pull the chunk toward the
    dataset's mean), and execution_horizon is at most their number;
(c) the first (cold) call's latency (session buffers, pages of weights, caches) stays out of the estimate.

Deterministic tests: ``clock`` and ``sleep`` are injectable, ``background=False`` runs each inference in the
calling thread, and ``simulated_latency`` makes an inference's result appear only once ``clock()`` has passed
its start plus the latency given (the loop sees exactly the delays a slow machine would give).
"""
import collections
import dataclasses
import math
import numbers
import threading
import time
import weakref

import numpy as np

from .errors import ClosedError, Error, Status, input_error
from .policy import _RTC_GUIDANCES, _RTC_SCHEDULES


_DEFAULT_EXECUTION_HORIZON = 10   # MACT_RTC_DEFAULT_EXECUTION_HORIZON


@dataclasses.dataclass
class Inference:
    """One inference of a RealTimeRunner (``runner.inferences``): what it was given and how it was spliced."""
    index: int                 # its place in runner.inferences: chunks of this episode, from 0
    start_tick: int            # actions returned this episode before it started
    start_time: float          # clock() at its start
    cold: bool                 # the runner's first call (of any episode; until one succeeds): its latency stays
                               # out of the delay estimate
    queued: int                # rows left in the queue when it started
    prev_rows: int             # rows of prev_actions passed (0: none, RTC off for this call)
    delay: int                 # inference_delay passed
    execution_horizon: int     # execution_horizon passed (0 when no rows)
    estimated_delay: int       # the estimate before it was capped at the rows given
    prev_actions: object = None   # float32 [prev_rows, action_dim]: the rows passed (None when none)
    prev_source: tuple = ()    # (chunk index, row) of each row passed
    latency: float = None      # seconds (clock; the simulated latency when one is given); None while in flight
    end_tick: int = None       # actions returned before it was spliced in
    consumed: int = None       # rows the robot executed while it ran (end_tick - start_tick)
    splice_row: int = None     # the new chunk's first row put in the queue (= consumed)
    rows: int = None           # rows of the new chunk
    underrun: bool = False     # the queue ran dry before it arrived: the loop waited for it
    actions: object = None     # float32 [rows, action_dim], the chunk as predict_action returned it


def _latency_fn(sim):
    if sim is None or callable(sim):
        return sim
    seq = [float(x) for x in sim]
    if not seq:
        raise input_error("simulated_latency: an empty sequence")
    return lambda k: seq[min(k, len(seq) - 1)]


def _count(v, what, lo=0):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < lo:
        raise input_error(f"{what} {v!r}: expected an int >= {lo}")
    return int(v)


def _snapshot(images):
    """The caller may reuse its frame buffers: arrays copied (PIL images are left as they are)."""
    if isinstance(images, np.ndarray):
        return images.copy()
    if isinstance(images, (list, tuple)):
        return [im.copy() if isinstance(im, np.ndarray) else im for im in images]
    return images


class _Worker:
    """One background thread running the inferences, so that the policy's per-thread session stays warm."""

    def __init__(self, clock):
        self.clock = clock
        self.cond = threading.Condition()
        self.job = None            # a callable to run
        self.result = None         # (output or None, exception or None, finish time)
        self.stop = False
        self.thread = threading.Thread(target=self._run, name="mact-realtime", daemon=True)
        self.thread.start()

    def _run(self):
        while True:
            with self.cond:
                while self.job is None and not self.stop:
                    self.cond.wait()
                if self.stop:
                    return
                job = self.job
            try:
                out, exc = job(), None
            except BaseException as e:  # handed to the control thread
                out, exc = None, e
            done = self.clock()
            job = None                  # no reference to the runner left here between jobs
            with self.cond:
                self.job, self.result = None, (out, exc, done)
                self.cond.notify_all()

    def submit(self, job):
        with self.cond:
            self.job, self.result = job, None
            self.cond.notify_all()

    def done(self):
        with self.cond:
            return self.result is not None

    def wait(self):
        with self.cond:
            while self.result is None:
                self.cond.wait()
            r, self.result = self.result, None
            return r

    def signal_stop(self):
        with self.cond:
            self.stop = True
            self.cond.notify_all()

    def close(self):
        self.signal_stop()
        self.thread.join()


class RealTimeRunner:
    """Actions for a control loop at ``fps`` from a mact.Policy, one row per tick, with real-time chunking.

    runner.step(images, state, task=None) -> float32 [action_dim]: observe() then get_action(); call it once per
        control tick.
    runner.observe(images, state, task=None): the latest observation (the next inference starts from it).
    runner.get_action() -> the next action row. It first splices in a finished inference, then starts the next
        one when the queue has ``queue_threshold`` rows or fewer, then returns the queue's first row. It blocks
        only when the queue is empty (the first chunk of an episode, or an inference slower than the rows
        left: an underrun, recorded).
    runner.reset(): a new episode: the queue and the observation emptied (an inference in flight is waited for
        and dropped); the latency estimate is kept (the process stays warm).
    runner.close() (or ``with``): stops the background thread.
    Read-only state: ``queued`` (rows left), ``in_flight``, ``ticks`` (actions returned this episode),
    ``last_source`` ((chunk index, row) of the last action returned), ``inferences`` (an Inference per chunk
    this episode), ``latencies`` (the warm latencies in the window), ``estimated_delay`` (the next call's d
    before it is capped at the rows given).

    policy: a mact.Policy (anything with its predict_action). fps: control ticks per second.
    task: the instruction when observe() is given none.
    queue_threshold: start the next inference when this many rows or fewer are left (None: half a chunk). It
        should exceed the delay, or the loop waits (underruns).
    latency_window: the delay is ceil(max of the last latency_window warm latencies x fps).
    initial_delay: d while no warm latency is known yet (the call after the cold one).
    rtc: False: the same loop with no guidance (prev_actions not passed; the splice is the same).
    execution_horizon, rtc_schedule, max_guidance_weight, rtc_guidance: predict_action's (execution_horizon
        None: the library's default, 10; always capped here at the rows given).
    seed: None: every chunk from the library's default seed; an int s: chunk k of an episode (counted from
        reset()) from seed s + k, as mact.LeRobotAdapter does.
    clock: seconds, monotonic (time.monotonic). sleep: waits seconds (time.sleep); used while the queue is
        empty with a simulated latency.
    background: run inferences on a background thread (default) or in the calling thread (False).
    simulated_latency: for tests: None, a callable (k -> seconds, k counting the runner's inferences from 0
        across episodes) or a sequence of seconds (the last repeated); each inference then runs in the calling
        thread and its result is held until clock() reaches its start plus that latency, which is the latency
        recorded.
    Other keyword arguments (norm_tag, num_steps, n_action_steps, ...) go to predict_action.
    """

    def __init__(self, policy, fps, *, task=None, queue_threshold=None, latency_window=5, initial_delay=0, rtc=True,
                 execution_horizon=None, rtc_schedule="linear", max_guidance_weight=10.0, rtc_guidance="identity",
                 seed=None, clock=time.monotonic, sleep=time.sleep, background=None, simulated_latency=None,
                 **predict_kwargs):
        if isinstance(fps, bool) or not isinstance(fps, numbers.Real) or not (math.isfinite(fps) and fps > 0):
            raise input_error(f"fps {fps!r}: expected a finite number > 0")
        for k in ("prev_actions", "inference_delay", "images", "state", "task", "seed"):
            if k in predict_kwargs:
                raise TypeError(f"RealTimeRunner sets predict_action's {k} itself")
        self.policy = policy
        self.fps = float(fps)
        self.task = task
        self.queue_threshold = None if queue_threshold is None else _count(queue_threshold, "queue_threshold")
        self.latency_window = _count(latency_window, "latency_window", 1)
        self.initial_delay = _count(initial_delay, "initial_delay")
        if execution_horizon is not None:
            execution_horizon = _count(execution_horizon, "execution_horizon", 1)
        self.rtc = bool(rtc)
        # names checked now rather than at the first guided call, a chunk into the episode
        if rtc_schedule not in _RTC_SCHEDULES:
            raise input_error(f"rtc_schedule {rtc_schedule!r}: unknown; expected one of {', '.join(_RTC_SCHEDULES)}")
        if rtc_guidance not in _RTC_GUIDANCES:
            raise input_error(f"rtc_guidance {rtc_guidance!r}: unknown; expected one of {', '.join(_RTC_GUIDANCES)}")
        self.rtc_kwargs = dict(rtc_schedule=rtc_schedule, max_guidance_weight=max_guidance_weight,
                               rtc_guidance=rtc_guidance)
        self.execution_horizon = execution_horizon
        self.seed = seed
        self.predict_kwargs = predict_kwargs
        self.clock, self.sleep = clock, sleep
        self._sim = _latency_fn(simulated_latency)
        if background is None:
            background = self._sim is None
        if background and self._sim is not None:
            raise input_error("simulated_latency runs each inference in the calling thread: background=False")
        self._worker = _Worker(clock) if background else None
        if self._worker is not None:  # a runner dropped without close(): its thread ends too
            weakref.finalize(self, self._worker.signal_stop)
        self.latencies = collections.deque(maxlen=self.latency_window)
        self._started = 0          # inferences started by this runner
        self._warm = False         # one has succeeded: the next ones are warm
        self._horizon = None       # the rows the model generates (ActionOutput.horizon), once known
        self._closed = False
        self._pending = None       # (Inference, ready time or None, sync result or None)
        self.reset()

    # ---- lifetime ----
    def reset(self):
        """A new episode: drops the queue, the observation and an inference in flight (waited for)."""
        if getattr(self, "_pending", None) is not None and self._worker is not None:
            self._worker.wait()
        self._pending = None
        self._queue = collections.deque()    # (chunk index, row, action row)
        self._obs = None
        self.ticks = 0
        self.last_source = None
        self.inferences = []

    def close(self):
        """Stops the background thread (after an inference in flight). Idempotent; the policy stays open."""
        if not self._closed:
            self._closed = True
            if self._worker is not None:
                self._worker.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- state ----
    @property
    def queued(self):
        """Rows of the current chunk not returned yet."""
        return len(self._queue)

    @property
    def in_flight(self):
        return self._pending is not None

    @property
    def estimated_delay(self):
        """d for the next inference before it is capped at the rows given: ceil(max of the warm latencies in
        the window x fps), or initial_delay while none is known."""
        if not self.latencies:
            return self.initial_delay
        return int(math.ceil(max(self.latencies) * self.fps - 1e-9))

    # ---- the loop's calls ----
    def observe(self, images, state, task=None):
        """The latest observation: camera frames (as predict_action takes them), raw state, and the task (None:
        the runner's). The next inference to start (in get_action) uses it, copied then."""
        if self._closed:
            raise ClosedError("this mact.RealTimeRunner is closed", Status.ERR_INPUT)
        task = self.task if task is None else task
        if task is None:
            raise input_error("no task: pass task= to observe() or step(), or to RealTimeRunner")
        self._obs = (images, state, task)

    def step(self, images, state, task=None):
        """observe(images, state, task), then get_action(): the action for this tick."""
        self.observe(images, state, task)
        return self.get_action()

    def get_action(self):
        """The action for this tick: float32 [action_dim], robot units (see the class's description)."""
        if self._closed:
            raise ClosedError("this mact.RealTimeRunner is closed", Status.ERR_INPUT)
        if self._obs is None:
            raise input_error("no observation yet: call observe() or step() first")
        self._poll()
        if self._pending is None and len(self._queue) <= self._threshold():
            self._start()
            self._poll()
        while not self._queue:
            if self._pending is None:
                self._start()
            self._wait()
        chunk, row, a = self._queue.popleft()
        self.ticks += 1
        self.last_source = (chunk, row)
        return a.copy()

    # ---- inside ----
    def _threshold(self):
        if self.queue_threshold is not None:
            return self.queue_threshold
        last = self.inferences[-1].rows if self.inferences and self.inferences[-1].rows else None
        return max(1, last // 2) if last else 0

    def _start(self):
        images, state, task = self._obs
        images, state = _snapshot(images), np.array(state, copy=True)   # the caller may reuse its buffers
        k, index = self._started, len(self.inferences)
        prev = list(self._queue) if self.rtc else []
        est = self.estimated_delay
        n = len(prev)
        if n:
            # (a) d at most the rows given (and below the horizon, which the library requires); (b) the rows left
            # exactly, execution_horizon at most their number
            d = min(est, n, (self._horizon or n + 1) - 1)
            e = min(self.execution_horizon or _DEFAULT_EXECUTION_HORIZON, n)
            rows = np.stack([r for _, _, r in prev]).astype(np.float32, copy=False)
            rtc = dict(prev_actions=rows, inference_delay=d, execution_horizon=e, **self.rtc_kwargs)
        else:
            d = e = 0
            rows = None
            rtc = {}
        inf = Inference(index=index, start_tick=self.ticks, start_time=self.clock(), cold=not self._warm,
                        queued=len(self._queue), prev_rows=n, delay=d,
                        execution_horizon=e, estimated_delay=est, prev_actions=None if rows is None else rows.copy(),
                        prev_source=tuple((c, r) for c, r, _ in prev))
        self._started += 1
        self.inferences.append(inf)
        kw = dict(self.predict_kwargs)
        if self.seed is not None:
            kw["seed"] = self.seed + index
        kw.update(rtc)

        def job():
            return self.policy.predict_action(images=images, task=task, state=state, **kw)

        if self._worker is not None:
            self._pending = (inf, None, None)
            self._worker.submit(job)
            return
        try:
            out, exc = job(), None
        except Exception as e:
            out, exc = None, e
        done = self.clock()
        ready = inf.start_time + float(self._sim(k)) if self._sim is not None else done
        self._pending = (inf, ready, (out, exc, ready))

    def _ready(self):
        inf, ready, res = self._pending
        if self._worker is not None:
            return self._worker.done()
        return self.clock() >= ready

    def _poll(self):
        if self._pending is not None and self._ready():
            self._splice()

    def _wait(self):
        """The queue is empty and an inference is in flight: wait for it (the robot idles), then splice."""
        inf, ready, _ = self._pending
        inf.underrun = inf.queued > 0   # rows were left when it started: they ran out (else: a first chunk)
        if self._worker is None:
            now = self.clock()
            if now < ready:
                self.sleep(ready - now)
                if self.clock() < ready:
                    raise Error(f"RealTimeRunner: clock() is {self.clock()} after sleep({ready - now}); the simulated "
                                f"latency ends at {ready}: pass a sleep that advances the clock")
        self._splice()

    def _splice(self):
        inf, ready, res = self._pending
        out, exc, done = self._worker.wait() if self._worker is not None else res
        self._pending = None
        if exc is not None:
            inf.latency = None
            raise exc
        inf.latency = done - inf.start_time
        self._warm = True
        if not inf.cold:
            self.latencies.append(inf.latency)   # (c) the cold call stays out
        acts = np.asarray(out.actions[0], np.float32)
        self._horizon = out.horizon or self._horizon
        c = self.ticks - inf.start_tick          # rows the robot executed while it ran
        inf.end_tick, inf.consumed, inf.splice_row = self.ticks, c, c
        inf.rows, inf.actions = acts.shape[0], acts
        self._queue.clear()                      # the old chunk's rest: replaced
        self._queue.extend((inf.index, j, acts[j]) for j in range(c, acts.shape[0]))
