"""Real-time chunking from Python: predict_action's prev_actions/inference_delay/... against `mact run
--prev-actions` (bitwise), the 2-step prefix property, every bad input, and mact.RealTimeRunner on a simulated
clock (delays estimated, splices, no padding) and on its background thread. Fresh random inputs per run, from
$SEED or the time (printed)."""
import json
import math
import os
import time
import unittest

import numpy as np

from common import DIR, MODEL, STATE, TASK, bitwise_equal, cli_message, frame, frame_files, mact, mact_run

SEED = int(os.environ.get("SEED") or time.time_ns() % 2**31)
SCHEDULES = ("linear", "zeros", "ones", "exp")


def info(msg):
    print(f"INFO py_rtc {msg}", flush=True)


class _Base(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.policy = mact.Policy.from_pretrained(MODEL)
        cls.files = [frame_files(0, ("npy",))["npy"], frame_files(1, ("npy",))["npy"]]
        cls.frames = [frame(0), frame(1)]
        cls.tag = cls.policy.norm_tags["libero"]
        cls.H = cls.tag.action_horizon
        stats = json.load(open(os.path.join(MODEL, "norm_stats.json")))["metadata_by_tag"]["libero"]["action_stats"]
        cls.range = np.array(stats["q99"], np.float64) - np.array(stats["q01"], np.float64)
        cls.rng = np.random.default_rng(SEED + sum(map(ord, cls.__name__)))

    @classmethod
    def tearDownClass(cls):
        cls.policy.close()

    def predict(self, **kw):
        return self.policy.predict_action(images=self.frames, task=TASK, state=STATE, **kw).actions

    def prev_rows(self, n, seed=None):
        """n rows of a chunk predict_action returned (robot units), its last n (the rows not executed yet)."""
        seed = int(self.rng.integers(0, 2**62)) if seed is None else seed
        return self.predict(seed=seed)[0][self.H - n:]

    def save(self, name, a):
        p = os.path.join(DIR, name)
        np.save(p, np.asarray(a))
        return p


class Predict(_Base):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        info(f"SEED={SEED}")

    def test_off_is_bitwise_today(self):
        # prev_actions None: the result without RTC, whatever the other RTC arguments (at their defaults)
        s = int(self.rng.integers(0, 2**62))
        a = self.predict(seed=s)
        b = self.predict(seed=s, prev_actions=None, inference_delay=0, execution_horizon=None, rtc_schedule="exp",
                         max_guidance_weight=3.0, rtc_guidance="vjp")
        self.assertTrue(bitwise_equal(a, b))
        ref, err, _ = mact_run(self.files, extra=["--seed", str(s)])
        self.assertTrue(bitwise_equal(b[0], ref), err)

    def test_cli_bitwise(self):
        # the same frames/state/seed/rows through `mact run --prev-actions ... --json` and predict_action
        cases = []
        for k, sched in enumerate(SCHEDULES * 2):
            n = int(self.rng.integers(1, self.H + 1))
            d = int(self.rng.integers(0, min(n, self.H - 1) + 1))
            e = None if k % 3 == 0 else int(self.rng.integers(1, self.H + 3))
            beta = None if k % 2 else float(np.round(self.rng.uniform(0.5, 20), 3))
            steps = int(self.rng.integers(2, 11))
            seed = int(self.rng.integers(0, 2**62))
            cases.append((sched, n, d, e, beta, steps, seed, k % 2 == 1))
        worst = 0.0
        for sched, n, d, e, beta, steps, seed, jitter in cases:
            prev = self.prev_rows(n)
            if jitter:
                prev = prev + self.rng.normal(0, 0.05, prev.shape).astype(np.float32)  # not only a model's rows
            p = self.save("prev.npy", prev.astype(np.float32))
            extra = ["--prev-actions", p, "--inference-delay", str(d), "--rtc-schedule", sched, "--steps", str(steps),
                     "--seed", str(seed)]
            kw = dict(prev_actions=prev, inference_delay=d, rtc_schedule=sched, num_steps=steps, seed=seed)
            if e is not None:
                extra += ["--execution-horizon", str(e)]
                kw["execution_horizon"] = e
            if beta is not None:
                extra += ["--max-guidance-weight", repr(beta)]
                kw["max_guidance_weight"] = beta
            dump = os.path.join(DIR, "rtc_dump")
            ref, err, doc = mact_run(self.files, extra=extra + ["--dump", dump])
            self.assertIsNotNone(ref, err)
            with self.policy.session() as s:
                out = s.predict_action(images=self.frames, task=TASK, state=STATE, **kw)
                pn = s.tensor("prev_actions_norm")
            self.assertTrue(bitwise_equal(out.actions[0], ref), f"{sched} n {n} d {d} e {e}: {out.actions[0][:2]} vs "
                                                                f"{ref[:2]}")
            self.assertTrue(bitwise_equal(pn, np.load(os.path.join(dump, "prev_actions_norm.npy"))))
            self.assertEqual(pn.shape, (n, self.tag.action_dim))
            # and through the Policy (the thread's session), with a leading batch dimension of 1
            self.assertTrue(bitwise_equal(self.predict(**dict(kw, prev_actions=prev[None]))[0], ref))
            plain = self.predict(seed=seed, num_steps=steps)[0]
            worst = max(worst, float(np.abs(plain - ref).max()))
        shown = ", ".join(f"{c[0]} n{c[1]} d{c[2]} e{c[3]}" for c in cases)
        info(f"cli_bitwise: {len(cases)} cases bitwise equal ({shown}); max |RTC - plain| {worst:.4g} (RTC changed "
             "the chunks)")
        self.assertGreater(worst, 0.0)

    def test_vjp(self):
        n, d = 6, 2
        prev = self.prev_rows(n)
        p = self.save("prev_vjp.npy", prev)
        seed = int(self.rng.integers(0, 2**62))
        ref, err, _ = mact_run(self.files, extra=["--prev-actions", p, "--inference-delay", str(d), "--rtc-guidance",
                                                  "vjp", "--seed", str(seed)])
        try:
            out = self.predict(prev_actions=prev, inference_delay=d, rtc_guidance="vjp", seed=seed)
        except mact.UnsupportedError as e:
            info(f"vjp refused by this library: {e}")
            self.assertIsNone(ref, "the CLI accepted vjp where the library refused it to Python")
            self.assertEqual(str(e), cli_message(err))
            self.assertIn("vjp", str(e))
            self.assertEqual(e.status, mact.Status.ERR_UNSUPPORTED)
            self.assertIsInstance(e, NotImplementedError)
            return
        self.assertIsNotNone(ref, err)
        self.assertTrue(bitwise_equal(out[0], ref))
        ident = self.predict(prev_actions=prev, inference_delay=d, seed=seed)
        info(f"vjp: bitwise equal to the CLI; max |vjp - identity| {float(np.abs(out - ident).max()):.4g}")

    def test_two_step_prefix(self):
        # 2 flow steps: rows of weight 1 (before d; before e for "ones") come back equal to prev_actions, in robot
        # units, to float rounding; without RTC they do not
        tol = 1e-5 * self.range
        for sched in SCHEDULES:
            n = int(self.rng.integers(3, self.H + 1))
            d = int(self.rng.integers(1, n))
            e = int(self.rng.integers(d, n + 1))
            prev = self.prev_rows(n)
            seed = int(self.rng.integers(0, 2**62))
            out = self.predict(prev_actions=prev, inference_delay=d, execution_horizon=e, rtc_schedule=sched,
                               num_steps=2, seed=seed)[0]
            plain = self.predict(num_steps=2, seed=seed)[0]
            k = e if sched == "ones" else d
            err = np.abs(out[:k].astype(np.float64) - prev[:k]) / self.range
            off = np.abs(plain[:k].astype(np.float64) - prev[:k]) / self.range
            info(f"two_step {sched} n {n} d {d} e {e}: rows [0, {k}) max |new - prev| / range {err.max():.3g} "
                 f"(tolerance 1e-05); without RTC {off.max():.3g}")
            self.assertTrue(np.all(np.abs(out[:k] - prev[:k]) <= tol), f"{sched}: {err.max()}")
            self.assertGreater(off.max(), 1e-3)
            if sched == "zeros" and k < self.H:
                # past d nothing is guided toward prev (weight 0): those rows are not pinned to it
                self.assertGreater(float(np.abs(out[k:n] - prev[k:]).max()) if k < n else 1.0, 1e-4)


class BadInput(_Base):
    def check(self, want, cli_extra=None, cls=mact.InputError, **kw):
        """predict_action(**kw) raises cls naming the problem (want in its message); with cli_extra, exactly the
        message `mact run` prints for the same input."""
        with self.assertRaises(cls) as cm:
            self.predict(**kw)
        msg = str(cm.exception)
        self.assertIn(want, msg)
        self.assertIsInstance(cm.exception, mact.Error)
        if cli_extra is not None:
            ref, err, _ = mact_run(self.files, extra=cli_extra)
            self.assertIsNone(ref)
            self.assertEqual(msg, cli_message(err))
        return msg

    def test_bad_inputs(self):
        n = 6
        prev = self.prev_rows(n)
        full = self.prev_rows(self.H)
        p = self.save("bad_prev.npy", prev)
        seen = []
        # the library's checks (the CLI's message for the same input)
        w = prev[:, :5].copy()
        seen.append(self.check("prev_actions rows have 5 values; the action dim is 7",
                               ["--prev-actions", self.save("bad_w.npy", w)], prev_actions=w))
        wide = np.concatenate([prev, prev[:, :2]], axis=1)
        seen.append(self.check("rows have 9 values", ["--prev-actions", self.save("bad_w9.npy", wide)],
                               prev_actions=wide))
        for bad, shown in ((np.nan, "nan"), (np.inf, "inf"), (-np.inf, "-inf")):
            x = prev.copy()
            x[2, 4] = bad
            seen.append(self.check(f"prev_actions[2][4] is {shown}", ["--prev-actions", self.save("bad_nan.npy", x)],
                                   prev_actions=x))
        seen.append(self.check(f"inference_delay {n + 1} is larger than the {n} previous chunk rows",
                               ["--prev-actions", p, "--inference-delay", str(n + 1)], prev_actions=prev,
                               inference_delay=n + 1))
        pf = self.save("bad_full.npy", full)
        seen.append(self.check(f"inference_delay {self.H} leaves no row of the {self.H}-row horizon",
                               ["--prev-actions", pf, "--inference-delay", str(self.H)], prev_actions=full,
                               inference_delay=self.H))
        more = np.concatenate([full, prev[:1]])
        seen.append(self.check(f"{self.H + 1} previous chunk rows; the horizon is {self.H} rows",
                               ["--prev-actions", self.save("bad_more.npy", more)], prev_actions=more))
        seen.append(self.check("inference_delay -1 must be >= 0", None, prev_actions=prev, inference_delay=-1))
        seen.append(self.check("execution_horizon -2 must be >= 0", None, prev_actions=prev, execution_horizon=-2))
        seen.append(self.check("inference_delay 2 but no previous chunk rows were given", None, inference_delay=2))
        for bw in (-1.0, float("nan"), float("inf")):
            seen.append(self.check("max_guidance_weight", None, prev_actions=prev, max_guidance_weight=bw))
        self.assertIn("must be finite and >= 0", seen[-1])
        # the binding's own checks, before the call
        seen.append(self.check("rtc_schedule 'cosine': unknown; expected one of linear, zeros, ones, exp",
                               prev_actions=prev, rtc_schedule="cosine"))
        seen.append(self.check("rtc_schedule 'Linear'", rtc_schedule="Linear"))
        seen.append(self.check("rtc_guidance 'jacobian': unknown; expected one of identity, vjp", prev_actions=prev,
                               rtc_guidance="jacobian"))
        seen.append(self.check("max_guidance_weight 0: must be > 0", prev_actions=prev, max_guidance_weight=0))
        seen.append(self.check("execution_horizon 0", prev_actions=prev, execution_horizon=0))
        seen.append(self.check("prev_actions: shape (7,); expected [n, action_dim]", prev_actions=prev[0]))
        seen.append(self.check("prev_actions: shape (0, 7) has no rows", prev_actions=prev[:0]))
        seen.append(self.check("prev_actions: shape (2, 6, 7)", prev_actions=np.stack([prev, prev])))
        seen.append(self.check("prev_actions: dtype", prev_actions=[["a"] * 7]))
        with self.assertRaises(TypeError):
            self.predict(prev_actions=prev, rtc_schedule=1)
        with self.assertRaises(TypeError):
            self.predict(prev_actions=prev, max_guidance_weight="10")
        for m in seen:
            info(f"bad input: {m}")
        # a refused call leaves the session usable: the next good call is the CLI's
        s = int(self.rng.integers(0, 2**62))
        ref, err, _ = mact_run(self.files, extra=["--prev-actions", p, "--inference-delay", "2", "--seed", str(s)])
        self.assertTrue(bitwise_equal(self.predict(prev_actions=prev, inference_delay=2, seed=s)[0], ref), err)


class FakeClock:
    """Time in ticks of 1/fps: clock() in seconds; sleep(dt) advances it; tick() moves to the next tick."""

    def __init__(self, fps):
        self.fps, self.t = fps, 0.0

    def __call__(self):
        return self.t / self.fps

    def sleep(self, dt):
        self.t += dt * self.fps

    def tick(self):
        self.t = math.floor(self.t + 1e-9) + 1.0


class Spy:
    """A Policy whose predict_action calls are recorded (their RTC arguments and results)."""

    def __init__(self, policy):
        self.policy, self.calls = policy, []

    def predict_action(self, **kw):
        out = self.policy.predict_action(**kw)
        self.calls.append((kw, out.actions[0].copy()))
        return out


class Runner(_Base):
    def run_sim(self, fps, latencies_ticks, ticks, threshold, **kw):
        """A RealTimeRunner on a FakeClock: each inference k takes latencies_ticks[k] ticks. -> (runner, spy,
        [(chunk, row, action) per tick])."""
        clock = FakeClock(fps)
        spy = Spy(self.policy)
        r = mact.RealTimeRunner(spy, fps, task=TASK, queue_threshold=threshold, clock=clock, sleep=clock.sleep,
                                simulated_latency=[x / fps for x in latencies_ticks], **kw)
        got = []
        for _ in range(ticks):
            a = r.step(self.frames, STATE)
            got.append(r.last_source + (a,))
            clock.tick()
        return r, spy, got

    def check_run(self, r, spy, got, lat, threshold, window):
        infs = r.inferences
        self.assertEqual(len(infs), len(spy.calls))
        # every action is the row of the chunk it says, bitwise
        for c, j, a in got:
            self.assertTrue(bitwise_equal(a, infs[c].actions[j]))
        src = [(c, j) for c, j, _ in got]
        warm = []
        for inf, (kw, acts) in zip(infs, spy.calls):
            k = inf.index
            self.assertEqual(inf.cold, k == 0)
            if inf.end_tick is None:
                continue                             # still in flight at the end
            self.assertAlmostEqual(inf.latency * r.fps, lat[min(k, len(lat) - 1)], places=6)
            # the delay: ceil(max of the last `window` warm latencies x fps), the cold one excluded; capped at the
            # rows given and below the horizon
            want_est = math.ceil(max(warm[-window:])) if warm else r.initial_delay
            self.assertEqual(inf.estimated_delay, want_est, f"chunk {k}: warm latencies {warm[-window:]}")
            if k:
                warm.append(lat[min(k, len(lat) - 1)])
            self.assertLessEqual(inf.delay, inf.prev_rows)
            self.assertLessEqual(inf.execution_horizon, inf.prev_rows)
            self.assertEqual(inf.delay, min(want_est, inf.prev_rows, self.H - 1) if inf.prev_rows else 0)
            if inf.prev_rows:
                # prev_actions: exactly the rows not executed yet, the old chunk's last ones, no padding
                self.assertEqual(kw["inference_delay"], inf.delay)
                self.assertEqual(kw["execution_horizon"], inf.execution_horizon)
                pa = kw["prev_actions"]
                self.assertEqual(pa.shape, (inf.prev_rows, self.tag.action_dim))
                self.assertTrue(bitwise_equal(pa, inf.prev_actions))
                old = infs[k - 1]
                last = src[inf.start_tick - 1]       # the last action executed before it started
                self.assertEqual(last[0], k - 1)
                self.assertEqual(inf.prev_source, tuple((k - 1, j) for j in range(last[1] + 1, old.rows)))
                self.assertTrue(bitwise_equal(pa, old.actions[last[1] + 1:]))
                self.assertFalse(np.any(np.all(pa == 0, axis=1)), "a zero (padding) row in prev_actions")
                self.assertLessEqual(inf.queued, threshold)
            else:
                self.assertNotIn("prev_actions", kw)
            # the splice: rows consumed while it ran, the new chunk's rows from there on
            need = math.ceil(lat[min(k, len(lat) - 1)] - 1e-9)
            want_c = 0 if not inf.queued else min(need, inf.queued)
            self.assertEqual(inf.consumed, want_c, f"chunk {k}")
            self.assertEqual(inf.underrun, bool(inf.queued) and need > inf.queued)
            self.assertEqual(inf.splice_row, inf.consumed)
            self.assertTrue(all(s[0] == k - 1 for s in src[inf.start_tick:inf.end_tick]))
            if inf.end_tick < len(src):
                self.assertEqual(src[inf.end_tick], (k, inf.consumed), f"chunk {k} spliced at the wrong row")
        return warm

    def test_simulated_clock(self):
        fps = int(self.rng.choice([10, 16, 30]))
        window = 5
        cold = 7.5
        lat = [cold] + [float(np.round(self.rng.uniform(1.1, 3.4), 2)) for _ in range(11)]
        lat = [x + 0.3 if abs(x - round(x)) < 0.05 else x for x in lat]       # no ties with a tick
        threshold = 4
        r, spy, got = self.run_sim(fps, lat, 60, threshold, latency_window=window, num_steps=2, seed=SEED)
        warm = self.check_run(r, spy, got, lat, threshold, window)
        infs = r.inferences
        info(f"sim fps {fps}: latencies in ticks {lat[:len(infs)]} (first cold)")
        for i in infs:
            info(f"  chunk {i.index}: start tick {i.start_tick} queued {i.queued} prev {i.prev_rows} est "
                 f"{i.estimated_delay} d {i.delay} e {i.execution_horizon} consumed {i.consumed} splice row "
                 f"{i.splice_row} underrun {i.underrun}")
        info("  sources: " + " ".join(f"{c}.{j}" for c, j, _ in got))
        self.assertGreaterEqual(len(infs), 6)
        self.assertLess(max(i.estimated_delay for i in infs[2:]), math.ceil(cold))   # (c): the cold 7.5 left out
        self.assertTrue(np.allclose(list(r.latencies), [x / fps for x in lat[1:len(warm) + 1]][-window:],
                                    rtol=0, atol=1e-12))
        # RTC did its job through the runner: 2 steps, the guided prefix rows equal the rows passed
        tol = 1e-5 * self.range
        worst = 0.0
        for i in infs[1:]:
            if i.actions is not None and i.delay:
                e = np.abs(i.actions[:i.delay] - i.prev_actions[:i.delay])
                worst = max(worst, float((e / self.range).max()))
                self.assertTrue(np.all(e <= tol))
        info(f"  guided rows [0, d) vs prev_actions: max |diff| / range {worst:.3g} (tolerance 1e-05)")

    def test_underrun_delay_capped(self):
        # latencies longer than the rows left: d capped at the rows given (never more), the loop waits
        fps = 20
        lat = [6.5, 5.5, 5.5, 4.6, 6.2]
        r, spy, got = self.run_sim(fps, lat, 40, 3, latency_window=3)
        self.check_run(r, spy, got, lat, 3, 3)
        capped = [i for i in r.inferences if i.prev_rows and i.estimated_delay > i.prev_rows]
        for i in r.inferences:
            info(f"underrun: chunk {i.index} queued {i.queued} est {i.estimated_delay} d {i.delay} prev {i.prev_rows} "
                 f"consumed {i.consumed} underrun {i.underrun}")
        self.assertTrue(capped)
        self.assertTrue(all(i.delay == i.prev_rows == 3 and i.underrun for i in capped))

    def test_no_rtc_and_sync(self):
        # rtc=False: no prev_actions passed, the same splice; background=False without a simulated latency: the
        # inference runs within the tick, nothing is consumed while it runs
        lat = [3.5, 2.5]
        r, spy, got = self.run_sim(16, lat, 30, 4, rtc=False)
        self.check_run(r, spy, got, lat, 4, 5)
        self.assertTrue(all("prev_actions" not in kw for kw, _ in spy.calls))
        clock = FakeClock(16)
        with mact.RealTimeRunner(self.policy, 16, task=TASK, queue_threshold=2, clock=clock, background=False,
                                 seed=3) as r2:
            src = []
            for _ in range(25):
                r2.step(self.frames, STATE)
                src.append(r2.last_source)
                clock.tick()
        self.assertTrue(all(i.consumed == 0 and i.delay == 0 for i in r2.inferences))
        self.assertEqual(src[:11], [(0, j) for j in range(8)] + [(1, 0), (1, 1), (1, 2)])
        # seeds: chunk k from seed + k (chunk 0 has no previous rows: the plain call)
        self.assertTrue(bitwise_equal(r2.inferences[0].actions, self.predict(seed=3)[0]))

    def test_background_thread(self):
        # the real clock and thread: no timing assertions; the bookkeeping must hold whatever the latencies
        fps = 60
        with mact.RealTimeRunner(self.policy, fps, task=TASK, queue_threshold=6, seed=SEED, num_steps=3) as r:
            got = []
            t0 = time.monotonic()
            for k in range(45):
                a = r.step(self.frames, STATE)
                got.append(r.last_source + (a,))
                time.sleep(max(0.0, t0 + (k + 1) / fps - time.monotonic()))
            infs = r.inferences
            for c, j, a in got:
                self.assertTrue(bitwise_equal(a, infs[c].actions[j]))
            for i in infs:
                self.assertLessEqual(i.delay, i.prev_rows)
                self.assertLessEqual(i.execution_horizon, i.prev_rows)
                if i.end_tick is not None and i.end_tick < len(got):
                    self.assertEqual(got[i.end_tick][:2], (i.index, i.consumed))
            done = [i for i in infs if i.latency is not None]
            self.assertEqual(len(r.latencies), min(5, len([i for i in done if not i.cold])))
            info(f"thread fps {fps}: {len(infs)} chunks, latencies (ms) "
                 f"{[round(i.latency * 1e3, 1) for i in done]} (first cold, kept out), delays "
                 f"{[i.delay for i in infs]}, consumed {[i.consumed for i in infs]}, underruns "
                 f"{sum(i.underrun for i in infs)}")
            r.reset()
            self.assertEqual((r.queued, r.ticks, r.inferences), (0, 0, []))
            with self.assertRaises(mact.InputError):
                r.get_action()                       # no observation after reset
            r.step(self.frames, STATE)
            self.assertFalse(r.inferences[0].cold)   # the process is warm: no second cold call
        with self.assertRaises(mact.ClosedError):
            r.step(self.frames, STATE)

    def test_bad_arguments(self):
        for kw, want in ((dict(fps=0), "fps 0"), (dict(fps=float("nan")), "fps nan"),
                         (dict(fps=10, queue_threshold=-1), "queue_threshold -1"),
                         (dict(fps=10, latency_window=0), "latency_window 0"),
                         (dict(fps=10, rtc_schedule="cos"), "rtc_schedule 'cos'"),
                         (dict(fps=10, rtc_guidance="x"), "rtc_guidance 'x'"),
                         (dict(fps=10, simulated_latency=[0.1], background=True), "simulated_latency")):
            with self.assertRaises(mact.InputError) as cm:
                mact.RealTimeRunner(self.policy, **kw)
            self.assertIn(want, str(cm.exception))
        with self.assertRaises(TypeError):
            mact.RealTimeRunner(self.policy, 10, prev_actions=[])
        with mact.RealTimeRunner(self.policy, 10, background=False) as r:
            with self.assertRaises(mact.InputError) as cm:
                r.step(self.frames, STATE)
            self.assertIn("no task", str(cm.exception))
        # a failed inference raises in the loop's thread (from the background thread too), and again on retry
        for bg in (True, False):
            with mact.RealTimeRunner(self.policy, 10, task=TASK, norm_tag="nope", background=bg) as r:
                for _ in range(2):
                    with self.assertRaises(mact.InputError) as cm:
                        r.step(self.frames, STATE)
                    self.assertIn("unknown norm tag", str(cm.exception))
                self.assertFalse(r.in_flight)
        # a failed first call does not warm the runner: the next call is still the cold one (kept out)
        spy, fail = Spy(self.policy), [True]

        def flaky(**kw):
            if fail.pop() if fail else False:
                raise mact.InputError("injected failure")
            return Spy.predict_action(spy, **kw)
        spy.predict_action = flaky
        clock = FakeClock(10)
        r = mact.RealTimeRunner(spy, 10, task=TASK, queue_threshold=4, clock=clock, sleep=clock.sleep,
                                simulated_latency=[9.5, 9.5, 2.5, 2.5])
        with self.assertRaises(mact.InputError):
            r.step(self.frames, STATE)
        for _ in range(12):
            r.step(self.frames, STATE)
            clock.tick()
        self.assertEqual([i.cold for i in r.inferences], [True, True, False])
        self.assertEqual(len(r.latencies), 1)


class AdapterRealTime(_Base):
    def test_lerobot_adapter_real_time(self):
        # LeRobotAdapter(real_time={...}): select_action is the runner's step on a LeRobot observation
        clock = FakeClock(16)
        ad = mact.LeRobotAdapter(self.policy, seed=100, real_time=dict(
            fps=16, queue_threshold=4, clock=clock, sleep=clock.sleep, simulated_latency=[5.5 / 16, 2.5 / 16]))
        obs = {"observation.images.image": self.frames[0], "observation.images.wrist_image": self.frames[1],
               "observation.state": np.array([STATE]), "task": [TASK]}
        rows = []
        for _ in range(20):
            rows.append(ad.select_action(obs))
            clock.tick()
        r = ad.runner
        self.assertEqual(rows[0].shape, (1, self.tag.action_dim))
        self.assertTrue(bitwise_equal(r.inferences[0].actions, self.predict(seed=100)[0]))  # chunk k: seed + k
        self.assertTrue(all(i.prev_rows == 4 and i.delay <= 4 for i in r.inferences[1:]))
        self.assertEqual([i.consumed for i in r.inferences if i.consumed is not None][1:], [3] * 2)
        self.assertEqual(ad.queued, r.queued)
        info(f"adapter real_time: 20 ticks, {len(r.inferences)} chunks, splice rows "
             f"{[i.splice_row for i in r.inferences]}, delays {[i.delay for i in r.inferences]}")
        ad.reset()
        self.assertEqual((ad.queued, r.inferences), (0, []))
        ad.close()
        with self.assertRaises(mact.InputError):
            mact.LeRobotAdapter(self.policy, real_time={"queue_threshold": 3})


if __name__ == "__main__":
    unittest.main()
