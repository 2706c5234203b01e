"""predict_action against `mact run --json`: bitwise, with numpy and PIL frames; the model card's call."""
import os
import unittest

import numpy as np

from common import (MODEL, STATE, TASK, bitwise_equal, frame, frame_files, mact, mact_run)


class Predict(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.policy = mact.Policy.from_pretrained(MODEL)
        cls.files = [frame_files(0), frame_files(1)]
        cls.frames = [frame(0), frame(1)]

    @classmethod
    def tearDownClass(cls):
        cls.policy.close()

    def check_cli(self, extra=(), **kw):
        ref, err, doc = mact_run([f["npy"] for f in self.files], extra=extra)
        self.assertIsNotNone(ref, err)
        out = self.policy.predict_action(images=self.frames, task=TASK, state=STATE, **kw)
        self.assertEqual(out.actions.dtype, np.float32)
        self.assertEqual(out.actions.shape, (1,) + ref.shape)
        self.assertTrue(bitwise_equal(out.actions[0], ref), f"{out.actions[0][:2]} vs {ref[:2]}")
        self.assertEqual(out.n_tokens, doc["n_tokens"])
        self.assertEqual(out.horizon, doc["horizon"])
        self.assertEqual(set(out.timings), {"preprocess", "vision", "llm", "action", "total"})
        self.assertTrue(all(v >= 0 for v in out.timings.values()))
        return out

    def test_default_seed(self):
        self.check_cli()

    def test_seed(self):
        a = self.check_cli(["--seed", "12345"], seed=12345)
        b = self.policy.predict_action(images=self.frames, task=TASK, state=STATE, seed=12346)
        self.assertFalse(bitwise_equal(a.actions, b.actions))

    def test_seed_u64_max(self):
        self.check_cli(["--seed", str(2**64 - 1)], seed=2**64 - 1)

    def test_num_steps_and_n_action_steps(self):
        out = self.check_cli(["--steps", "5", "--n-action-steps", "3", "--seed", "9"], num_steps=5, n_action_steps=3,
                             seed=9)
        self.assertEqual(out.actions.shape[1], 3)

    def test_noise(self):
        info = self.policy.info
        tag = self.policy.norm_tags["libero"]
        noise = np.random.default_rng(4).standard_normal((tag.action_horizon, info.max_action_dim)).astype(np.float32)
        p = os.path.join(os.environ["MACT_PY_DIR"], "noise.npy")
        np.save(p, noise)
        self.check_cli(["--noise", p], noise=noise)
        self.check_cli(["--noise", p], noise=noise[None])            # [1, h, A] accepted
        self.check_cli(["--noise", p], noise=noise.astype(np.float64))  # converted, exactly

    def test_norm_tag_explicit(self):
        self.check_cli(["--norm-tag", "libero"], norm_tag="libero")

    def test_state_forms(self):
        ref = self.policy.predict_action(images=self.frames, task=TASK, state=STATE).actions
        for st in (np.array(STATE), np.array(STATE, np.float32), np.array([STATE]), tuple(STATE)):
            out = self.policy.predict_action(images=self.frames, task=TASK, state=st)
            self.assertTrue(bitwise_equal(out.actions, ref))

    def test_pil_equals_numpy_equals_png(self):
        from PIL import Image
        ref, err, _ = mact_run([f["png"] for f in self.files], extra=["--seed", "3"])
        self.assertIsNotNone(ref, err)
        pil = [Image.open(f["png"]) for f in self.files]
        a = self.policy.predict_action(images=pil, task=TASK, state=STATE, seed=3).actions
        b = self.policy.predict_action(images=self.frames, task=TASK, state=STATE, seed=3).actions
        c = self.policy.predict_action(images=[np.asarray(p.convert("RGBA").convert("RGB")) for p in pil], task=TASK,
                                       state=STATE, seed=3).actions
        rgba = [p.convert("RGBA") for p in pil]                        # converted to RGB by the binding
        d = self.policy.predict_action(images=rgba, task=TASK, state=STATE, seed=3).actions
        for x in (a, b, c, d):
            self.assertTrue(bitwise_equal(x[0], ref))
        # mixed, and a non-contiguous view (BGR flipped twice), and a 4-D stack
        bgr = self.frames[1][:, :, ::-1]
        e = self.policy.predict_action(images=[pil[0], bgr[:, :, ::-1]], task=TASK, state=STATE, seed=3).actions
        f = self.policy.predict_action(images=np.stack(self.frames), task=TASK, state=STATE, seed=3).actions
        self.assertTrue(bitwise_equal(e, a) and bitwise_equal(f, a))

    def test_model_card_call(self):
        # the SO-101 card's call, word for word but the model (processor ignored)
        out = self.policy.predict_action(processor=object(), images=self.frames, task=TASK, state=STATE,
                                         norm_tag="libero", inference_action_mode="continuous",
                                         enable_depth_reasoning=False, num_steps=10)
        ref, err, _ = mact_run([f["npy"] for f in self.files], extra=["--steps", "10", "--norm-tag", "libero"])
        self.assertTrue(bitwise_equal(out.actions[0], ref))

    def test_fp32_precision(self):
        with mact.Policy.from_pretrained(MODEL, precision="fp32", threads=1) as p:
            self.assertEqual(p.info.precision, "fp32")
            ref, err, _ = mact_run([f["npy"] for f in self.files], extra=["--precision", "fp32", "--seed", "2"])
            out = p.predict_action(images=self.frames, task=TASK, state=STATE, seed=2)
            self.assertTrue(bitwise_equal(out.actions[0], ref))

    def test_images_resized(self):
        # any frame size: the library resizes (same as the CLI on the same bytes)
        big = frame(2, 100, 75)
        p = os.path.join(os.environ["MACT_PY_DIR"], "big.npy")
        np.save(p, big)
        ref, err, _ = mact_run([p, self.files[1]["npy"]])
        out = self.policy.predict_action(images=[big, self.frames[1]], task=TASK, state=STATE)
        self.assertTrue(bitwise_equal(out.actions[0], ref))


if __name__ == "__main__":
    unittest.main()
