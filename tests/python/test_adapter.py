"""mact.LeRobotAdapter: select_action returns the chunk's rows in order and refills when the queue is empty;
LeRobot observation dicts, camera keys mapped to the checkpoint's camera order."""
import os
import unittest

import numpy as np

from common import DIR, MODEL, STATE, TASK, bitwise_equal, frame, mact, mact_run


class Adapter(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.policy = mact.Policy.from_pretrained(MODEL)
        cls.frames = [frame(0), frame(1)]

    @classmethod
    def tearDownClass(cls):
        cls.policy.close()

    def obs(self, **kw):
        o = {"observation.images.wrist_image": self.frames[1], "observation.images.image": self.frames[0],
             "observation.images.extra": frame(7), "observation.state": np.array(STATE), "task": TASK}
        o.update(kw)
        return o

    def chunk(self, seed=None, **kw):
        return self.policy.predict_action(images=self.frames, task=TASK, state=STATE, seed=seed, **kw).actions[0]

    def test_rows_in_order_and_refill(self):
        ad = mact.LeRobotAdapter(self.policy, seed=100)
        self.assertEqual(ad.camera_keys, list(self.policy.camera_keys()))
        n = self.policy.norm_tags["libero"].n_action_steps
        rows = [ad.select_action(self.obs()) for _ in range(2 * n + 3)]
        self.assertEqual(ad.queued, n - 3)
        want = np.concatenate([self.chunk(100), self.chunk(101), self.chunk(102)[:3]])
        self.assertEqual(len(rows), len(want))
        for r, w in zip(rows, want):
            self.assertEqual(r.shape, w.shape)
            self.assertTrue(bitwise_equal(r, w))
        ad.reset()
        self.assertEqual(ad.queued, 0)
        self.assertTrue(bitwise_equal(ad.select_action(self.obs()), self.chunk(100)[0]))  # chunk count restarts

    def test_n_action_steps_argument(self):
        ad = mact.LeRobotAdapter(self.policy, n_action_steps=4)
        rows = [ad.select_action(self.obs()) for _ in range(6)]
        want = self.chunk(n_action_steps=4)
        self.assertEqual(ad.queued, 2)
        for i, r in enumerate(rows):
            self.assertTrue(bitwise_equal(r, want[i % 4]))

    def test_camera_mapping(self):
        # an explicit order, by camera name: the wrist camera first
        ad = mact.LeRobotAdapter(self.policy, camera_keys=["wrist_image", "observation.images.image"], seed=3)
        got = ad.select_action(self.obs())
        want = self.policy.predict_action(images=self.frames[::-1], task=TASK, state=STATE, seed=3).actions[0, 0]
        self.assertTrue(bitwise_equal(got, want))
        with self.assertRaises(mact.InputError):
            mact.LeRobotAdapter(self.policy, camera_keys=["image"]).select_action(self.obs())  # one of two cameras
        with self.assertRaises(mact.InputError) as cm:
            mact.LeRobotAdapter(self.policy, camera_keys=["front", "image"]).select_action(self.obs())
        self.assertIn("observation.images.front", str(cm.exception))

    def test_lerobot_batched_float_chw(self):
        # LeRobot's own layout: batch of 1, CxHxW float in [0, 1], state [1, d], task a list of one. The floats
        # become bytes as libmact does it for a float32 .npy frame: the same actions as `mact run` on those files
        rng = np.random.default_rng(2)
        f0 = rng.random((48, 64, 3), dtype=np.float32)
        f0[0, 0] = [0.0, 1.0, 0.5]
        f1 = (self.frames[1] / 255.0).astype(np.float32)
        paths = [os.path.join(DIR, "float0.npy"), os.path.join(DIR, "float1.npy")]
        np.save(paths[0], f0)
        np.save(paths[1], f1)
        ref, err, _ = mact_run(paths)
        self.assertIsNotNone(ref, err)
        o = self.obs(**{"observation.images.image": f0.transpose(2, 0, 1)[None],
                        "observation.images.wrist_image": f1.transpose(2, 0, 1).astype(np.float64),
                        "observation.state": np.array([STATE], np.float32), "task": [TASK]})
        ad = mact.LeRobotAdapter(self.policy)
        a = ad.select_action(o)
        self.assertEqual(a.shape, (1, 7))
        self.assertTrue(bitwise_equal(a[0], ref[0]))
        self.assertTrue(bitwise_equal(ad.select_action(o)[0], ref[1]))

    def test_task_from_adapter(self):
        o = self.obs()
        del o["task"]
        with self.assertRaises(mact.InputError):
            mact.LeRobotAdapter(self.policy).select_action(o)
        a = mact.LeRobotAdapter(self.policy, task=TASK).select_action(o)
        self.assertTrue(bitwise_equal(a, self.chunk()[0]))


if __name__ == "__main__":
    unittest.main()
