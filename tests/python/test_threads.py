"""One Policy shared by threads (a session per thread, made on its first call, or explicit ones) gives the
serial results; calls release the GIL (ctypes.CDLL, not PyDLL)."""
import ctypes
import threading
import unittest

from common import MODEL, STATE, TASK, bitwise_equal, frame, mact

SEEDS = [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]


class Threads(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.policy = mact.Policy.from_pretrained(MODEL, threads=1)
        cls.frames = [frame(0), frame(1)]
        cls.serial = {s: cls.policy.predict_action(images=cls.frames, task=TASK, state=STATE, seed=s).actions
                      for row in SEEDS for s in row}

    @classmethod
    def tearDownClass(cls):
        cls.policy.close()

    def run_threads(self, work):
        results, errors = {}, []

        def body(i):
            try:
                results.update(work(i))
            except Exception as e:  # noqa: BLE001 - reported by the test
                errors.append(repr(e))

        ts = [threading.Thread(target=body, args=(i,)) for i in range(len(SEEDS))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(set(results), set(self.serial))
        for s, a in results.items():
            self.assertTrue(bitwise_equal(a, self.serial[s]), f"seed {s}")

    def test_shared_policy_thread_sessions(self):
        barrier = threading.Barrier(len(SEEDS))

        def work(i):
            barrier.wait()
            return {s: self.policy.predict_action(images=self.frames, task=TASK, state=STATE, seed=s).actions
                    for s in SEEDS[i]}
        self.run_threads(work)

    def test_explicit_sessions(self):
        def work(i):
            with self.policy.session(threads=1) as s:
                self.assertEqual(s.threads, 1)
                return {x: s.predict_action(images=self.frames, task=TASK, state=STATE, seed=x).actions
                        for x in SEEDS[i]}
        self.run_threads(work)

    def test_one_session_shared_is_serialized(self):
        sess = self.policy.session(threads=1)

        def work(i):
            return {x: sess.predict_action(images=self.frames, task=TASK, state=STATE, seed=x).actions
                    for x in SEEDS[i]}
        self.run_threads(work)
        sess.close()

    def test_close_waits_for_calls(self):
        p = mact.Policy.from_pretrained(MODEL, threads=1)
        started, done, errors = threading.Event(), [], []

        def loop():
            started.set()
            try:
                while True:
                    p.predict_action(images=self.frames, task=TASK, state=STATE)
                    done.append(1)
            except mact.ClosedError:
                pass
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))
        t = threading.Thread(target=loop)
        t.start()
        started.wait()
        while not done:
            pass
        p.close()
        t.join()
        self.assertEqual(errors, [])

    def test_gil_released(self):
        dll = self.policy.library._dll
        self.assertIsInstance(dll, ctypes.CDLL)
        self.assertNotIsInstance(dll, ctypes.PyDLL)


if __name__ == "__main__":
    unittest.main()
