"""Every bad input raises the right exception, carrying the library's message (the same text `mact run`
prints for the same input) or, for what the binding checks itself, its own."""
import json
import os
import platform
import shutil
import unittest

import numpy as np

from common import DIR, MODEL, STATE, TASK, cli_message, frame, frame_files, mact, mact_run


class Errors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.policy = mact.Policy.from_pretrained(MODEL)
        cls.frames = [frame(0), frame(1)]
        cls.npy = [frame_files(0, ("npy",))["npy"], frame_files(1, ("npy",))["npy"]]

    @classmethod
    def tearDownClass(cls):
        cls.policy.close()

    def predict(self, **kw):
        args = dict(images=self.frames, task=TASK, state=STATE)
        args.update(kw)
        return self.policy.predict_action(**args)

    def assert_library_error(self, cli_extra=(), cli_state=STATE, cls=mact.InputError, **kw):
        """predict_action(**kw) raises cls with exactly the message `mact run` prints for the same input."""
        _, err, _ = mact_run(self.npy, state=cli_state, extra=cli_extra)
        with self.assertRaises(cls) as cm:
            self.predict(**kw)
        self.assertEqual(str(cm.exception), cli_message(err))
        self.assertIsInstance(cm.exception, mact.Error)
        if cls is mact.InputError:
            self.assertEqual(cm.exception.status, mact.Status.ERR_INPUT)
        return cm.exception

    def test_nan_state(self):
        # `mact run --state` refuses nan and inf as text itself; the library's message for the same floats
        for bad, shown in ((float("nan"), "nan"), (float("inf"), "inf"), (-float("inf"), "-inf")):
            st = list(STATE)
            st[2] = bad
            with self.assertRaises(mact.InputError) as cm:
                self.predict(state=st)
            self.assertEqual(str(cm.exception), f"state[2] is {shown}: state must be finite")
            self.assertEqual(cm.exception.status, mact.Status.ERR_INPUT)
            self.assertIsInstance(cm.exception, ValueError)

    def test_state_dim(self):
        self.assert_library_error(cli_state=STATE[:3], state=STATE[:3])

    def test_unknown_norm_tag(self):
        e = self.assert_library_error(["--norm-tag", "so100"], norm_tag="so100")
        self.assertIn("unknown norm tag", str(e))

    def test_step_counts(self):
        self.assert_library_error(["--n-action-steps", "99"], n_action_steps=99)
        # the CLI refuses --steps -1 itself; the library's message
        with self.assertRaises(mact.InputError) as cm:
            self.predict(num_steps=-1)
        self.assertEqual(str(cm.exception), "num_steps -1: flow steps must be in 1..1000 (0: the config's)")

    def test_noise_length(self):
        noise = np.zeros((3, self.policy.info.max_action_dim), np.float32)
        p = os.path.join(DIR, "noise3.npy")
        np.save(p, noise)
        self.assert_library_error(["--noise", p], noise=noise)

    def test_task_special_tokens(self):
        _, err, _ = mact_run(self.npy, task="look <|image|> here")
        with self.assertRaises(mact.InputError) as cm:
            self.predict(task="look <|image|> here")
        self.assertEqual(str(cm.exception), cli_message(err))

    def test_wrong_number_of_images(self):
        # the tag lists two cameras: libmact checks the count, so `mact run` refuses it with the same message
        for imgs, npy in (([self.frames[0]], self.npy[:1]), (self.frames * 2, self.npy * 2), ([], None)):
            with self.assertRaises(mact.InputError) as cm:
                self.predict(images=imgs)
            self.assertIn("norm tag \"libero\" takes 2 (observation.images.image, observation.images.wrist_image)",
                          str(cm.exception))
            if npy:
                acts, err, _ = mact_run(npy)
                self.assertIsNone(acts)   # refused: no actions printed
                self.assertEqual(str(cm.exception), cli_message(err))
        # a checkpoint whose tag lists no cameras: the library's own bounds (1..max_images), its message
        d = os.path.join(DIR, "nocams")
        if not os.path.isdir(d):
            shutil.copytree(MODEL, d)
            ns = json.load(open(os.path.join(d, "norm_stats.json")))
            for t in ns["metadata_by_tag"].values():
                t.pop("camera_keys", None)
            json.dump(ns, open(os.path.join(d, "norm_stats.json"), "w"))
        with mact.Policy.from_pretrained(d) as p:
            for imgs, msg in (([], "0 camera frames; this session takes 1..4"),
                              (self.frames * 3, "6 camera frames; this session takes 1..4")):
                with self.assertRaises(mact.InputError) as cm:
                    p.predict_action(images=imgs, task=TASK, state=STATE)
                self.assertEqual(str(cm.exception), msg)
            p.predict_action(images=self.frames[:1], task=TASK, state=STATE)  # allowed: no camera list to check
        with mact.Policy.from_pretrained(d, max_images=8) as p:
            p.predict_action(images=self.frames * 3, task=TASK, state=STATE)

    def test_frame_dtype_and_shape(self):
        f0 = self.frames[0]
        cases = [(f0.astype(np.float32) / 255, "dtype float32"), (f0.astype(np.int16), "dtype int16"),
                 (f0[:, :, 0], "shape (48, 64)"), (np.zeros((48, 64, 4), np.uint8), "shape (48, 64, 4)"),
                 (np.ascontiguousarray(f0.transpose(2, 0, 1)), "shape (3, 48, 64)"), (f0.astype(bool), "dtype bool")]
        for bad, what in cases:
            with self.assertRaises(mact.InputError) as cm:
                self.predict(images=[self.frames[0], bad])
            self.assertIn(f"camera frame 1: {what}", str(cm.exception))
        # empty frame: the library's message
        with self.assertRaises(mact.InputError) as cm:
            self.predict(images=[np.zeros((0, 64, 3), np.uint8), f0])
        self.assertEqual(str(cm.exception), "camera frame 0 is empty")
        with self.assertRaises(TypeError):
            self.predict(images=f0)                    # one frame, not a list
        with self.assertRaises(TypeError):
            self.predict(task=None)
        with self.assertRaises(mact.InputError):
            self.predict(state=[[1, 2], [3, 4]])
        with self.assertRaises(mact.InputError):
            self.predict(state=["a"] * 8)

    def test_binding_checks(self):
        with self.assertRaises(mact.InputError):
            self.predict(num_steps=0)
        with self.assertRaises(mact.InputError) as cm:
            self.predict(seed=1, noise=np.zeros((10, 32), np.float32))
        self.assertIn("seed or noise", str(cm.exception))
        with self.assertRaises(mact.InputError):
            self.predict(seed=-1)
        with self.assertRaises(mact.InputError):
            self.predict(seed=2**64)
        with self.assertRaises(mact.InputError):
            self.predict(noise=np.zeros((10, 31), np.float32))
        with self.assertRaises(mact.InputError):
            self.predict(task="a\0b")
        with self.assertRaises(mact.InputError):
            self.predict(num_steps=2**40)

    def test_not_implemented(self):
        with self.assertRaises(NotImplementedError) as cm:
            self.predict(inference_action_mode="discrete")
        self.assertIn("inference_action_mode", str(cm.exception))
        with self.assertRaises(NotImplementedError) as cm:
            self.predict(enable_depth_reasoning=True)
        self.assertIn("enable_depth_reasoning", str(cm.exception))

    def test_load_errors(self):
        missing = os.path.join(DIR, "no_such_model")
        _, err, _ = mact_run(self.npy, model=missing)
        with self.assertRaises(mact.FileError) as cm:
            mact.Policy.from_pretrained(missing)
        self.assertEqual(str(cm.exception), cli_message(err))
        self.assertEqual(cm.exception.status, mact.Status.ERR_IO)
        self.assertIsInstance(cm.exception, OSError)
        bad = os.path.join(DIR, "bad_config")
        if not os.path.isdir(bad):
            shutil.copytree(MODEL, bad)
            with open(os.path.join(bad, "config.json"), "w") as f:
                f.write("{ not json")
        _, err, _ = mact_run(self.npy, model=bad)
        with self.assertRaises(mact.Error) as cm:
            mact.Policy.from_pretrained(bad)
        self.assertEqual(str(cm.exception), cli_message(err))
        self.assertEqual(cm.exception.status, mact.Status.ERR_FORMAT)
        with self.assertRaises(mact.InputError):
            mact.Policy.from_pretrained(MODEL, precision="fp16")
        with self.assertRaises(mact.InputError):
            mact.Policy.from_pretrained(MODEL, kernels="sse9")
        if platform.machine() in ("x86_64", "AMD64"):  # a kernels name of another architecture: the library says so
            with self.assertRaises(mact.UnsupportedError) as cm:
                mact.Policy.from_pretrained(MODEL, kernels="neon")
            self.assertIn("ARM", str(cm.exception))

    def test_closed_policy(self):
        p = mact.Policy.from_pretrained(MODEL)
        p.predict_action(images=self.frames, task=TASK, state=STATE)
        s = p.session()
        p.close()
        p.close()  # idempotent
        self.assertTrue(p.closed and s.closed)
        for call in (lambda: p.predict_action(images=self.frames, task=TASK, state=STATE),
                     lambda: p.tokenize("hi"), lambda: p.session(), lambda: p.describe(),
                     lambda: s.predict_action(images=self.frames, task=TASK, state=STATE),
                     lambda: p.vision(np.zeros((1, p.info.n_patches, p.info.patch_dim), np.float32))):
            with self.assertRaises(mact.ClosedError) as cm:
                call()
            self.assertIn("closed", str(cm.exception))
            self.assertIsInstance(cm.exception, mact.InputError)
        # a closed session on an open policy
        with mact.Policy.from_pretrained(MODEL) as q:
            with q.session() as s2:
                s2.predict_action(images=self.frames, task=TASK, state=STATE)
            with self.assertRaises(mact.ClosedError):
                s2.predict_action(images=self.frames, task=TASK, state=STATE)
            q.predict_action(images=self.frames, task=TASK, state=STATE)  # the policy itself still works


if __name__ == "__main__":
    unittest.main()
