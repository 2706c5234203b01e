"""The lower levels: tokenize, info, describe, the stage boundaries on numpy arrays (mact_stages.h), the struct
layouts against a C compiler's, the version, how the library is found."""
import json
import os
import re
import subprocess
import sys
import unittest

import numpy as np

from common import DIR, MACT_BIN, MODEL, REPO, STATE, TASK, bitwise_equal, check_struct_layouts, frame, mact

LIB = os.environ.get("MACT_LIBRARY")


class Lowlevel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.policy = mact.Policy.from_pretrained(MODEL)
        cls.frames = [frame(0), frame(1)]

    @classmethod
    def tearDownClass(cls):
        cls.policy.close()

    def test_tokenize(self):
        for text in ("pick up the cube", "Pick up the blue cube and put it in the box.", "", "héllo <|image|> wörld"):
            r = subprocess.run([MACT_BIN, "tokenize", "--model", MODEL, text], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            want = [int(x) for x in r.stdout.split()]
            got = self.policy.tokenize(text)
            self.assertEqual(got.dtype, np.int64)
            self.assertEqual(got.tolist(), want)

    def test_info_and_describe(self):
        i = self.policy.info
        self.assertEqual((i.max_action_dim, i.max_action_horizon, i.tokens_per_image), (32, 30, 16))
        self.assertEqual(i.precision, "bf16")
        self.assertIn(i.kernels, ("ref", "avx2", "avx512", "avx512bf16", "neon", "neon-dotprod", "neon-i8mm"))
        self.assertEqual(i.patch_dim, i.patch_size * i.patch_size * 3)
        r = subprocess.run([MACT_BIN, "inspect", MODEL], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        d = self.policy.describe()
        self.assertTrue(d.strip())
        self.assertIn(d.strip().splitlines()[0], r.stdout)
        tag = self.policy.norm_tags["libero"]
        self.assertEqual((tag.state_dim, tag.action_dim, tag.action_horizon, tag.n_action_steps), (8, 7, 10, 10))
        self.assertEqual(self.policy.camera_keys(), tag.camera_keys)
        # every tag as the JSON file has it (mact_model_norm_tag against Python's json module)
        ns = json.load(open(os.path.join(MODEL, "norm_stats.json")))["metadata_by_tag"]
        self.assertEqual(list(self.policy.norm_tags), list(ns))
        for name, t in ns.items():
            got = self.policy.norm_tags[name]
            self.assertEqual((got.action_dim, got.state_dim, got.action_horizon, got.n_action_steps),
                             (len(t["action_stats"]["q01"]), len(t["state_stats"]["q01"]), t.get("action_horizon", 0),
                              t.get("n_action_steps", 0)), name)
            self.assertEqual(got.camera_keys, tuple(t.get("camera_keys") or ()), name)
            self.assertEqual((got.control_mode, got.setup_type), (t.get("control_mode", ""), t.get("setup_type", "")))
            # the dims' names, as the file names them (mact_norm_tag_info.state_names / action_names)
            self.assertEqual(got.state_names, tuple(t["state_stats"].get("names") or ()), name)
            self.assertEqual(got.action_names, tuple(t["action_stats"].get("names") or ()), name)
        # describe(as_json=True) is the contract `mact inspect --json` prints
        r = subprocess.run([MACT_BIN, "inspect", MODEL, "--json"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.policy.describe(as_json=True), json.loads(r.stdout)["norm_tags"])

    def test_stages_reproduce_predict(self):
        with self.policy.session() as s:
            out = s.predict_action(images=self.frames, task=TASK, state=STATE, seed=8)
            pv, ids = s.tensor("pixel_values"), s.tensor("input_ids")
            noise, want = s.tensor("noise"), s.tensor("actions_norm")
            embeds, keys, values = s.tensor("image_embeds"), s.tensor("keys"), s.tensor("values")
            i = self.policy.info
            self.assertEqual(pv.shape, (2, i.n_patches, i.patch_dim))
            self.assertEqual(keys.shape, (i.n_layers, out.n_tokens, i.kv_dim))
            adim, steps = out.actions.shape[2], i.flow_steps
            # the whole path from preprocessed inputs
            self.assertTrue(bitwise_equal(s.generate_from_ids(pv, ids, noise, adim, steps), want))
            # stage by stage
            e = s.vision(pv)
            self.assertTrue(bitwise_equal(e, embeds))
            hidden = s.embed(ids, e)
            bias = s.attention_bias(ids)
            self.assertEqual(bias.shape, (ids.size, ids.size))
            h2, k, v = s.llm_layers(hidden, bias)
            self.assertTrue(bitwise_equal(k, keys) and bitwise_equal(v, values))
            # split at a layer boundary: the same keys
            h1, k1, v1 = s.llm_layers(hidden, bias, 0, 1)
            _, k2, v2 = s.llm_layers(h1, bias, 1, i.n_layers)
            self.assertTrue(bitwise_equal(np.concatenate([k1, k2]), keys))
            mask = s.encoder_mask(ids)
            self.assertEqual(mask.dtype, np.uint8)
            self.assertTrue(bitwise_equal(s.action_generate(noise, adim, steps, k, v, mask), want))
            # one Euler step at a time (the loop mact_action_generate runs; its packed attention may round
            # differently, so close rather than bitwise)
            kc, vc = s.action_context(k, v)
            self.assertEqual(kc.shape, (i.n_layers, ids.size, i.ae_hidden))
            pad = (np.arange(i.max_action_dim) >= adim).astype(np.uint8)
            x = noise.copy()
            x[:, adim:] = 0
            for step in range(steps):
                x = s.action_step(x, step / steps, steps, kc, vc, mask, pad)
            np.testing.assert_allclose(x, want, rtol=1e-4, atol=1e-5)
            # stage errors: the library's messages; shapes: the binding's
            with self.assertRaises(mact.InputError) as cm:
                s.llm_layers(hidden, bias, 2, 1)
            self.assertEqual(str(cm.exception), f"llm: layer range [2, 1) is not within [0, {i.n_layers})")
            bad = pv.copy()
            bad[0, 0, 0] = np.nan
            with self.assertRaises(mact.InputError) as cm:
                s.vision(bad)
            self.assertIn("vision: pixel_values has a non-finite value", str(cm.exception))
            with self.assertRaises(mact.InputError) as cm:
                s.vision(pv[:, :, :10])
            self.assertIn("pixel_values: shape", str(cm.exception))
            with self.assertRaises(mact.InputError) as cm:
                s.embed(ids, e[:-1])
            self.assertIn("embed: the prompt has", str(cm.exception))
            with self.assertRaises(mact.InputError):
                s.tensor("nope")

    def test_policy_level_stages(self):
        # the thread's own session: the same calls on the policy
        self.policy.predict_action(images=self.frames, task=TASK, state=STATE)
        pv = self.policy.tensor("pixel_values")
        self.assertTrue(bitwise_equal(self.policy.vision(pv), self.policy.tensor("image_embeds")))

    def test_struct_layouts(self):
        # sizes and field offsets of every struct, as the C compiler lays them out
        from mact import _lib
        check_struct_layouts(self, _lib.STRUCTS, ["mact.h"])

    def test_no_heavy_imports(self):
        # numpy only: PIL is imported by the caller when it wants PIL images, PyTorch never
        code = ("import sys; sys.path.insert(0, sys.argv[1]); import mact, numpy as np; "
                "p = mact.Policy.from_pretrained(sys.argv[2]); "
                "p.predict_action(images=[np.zeros((8, 8, 3), np.uint8)] * 2, task='t', state=[0] * 8); "
                "print(sorted(m for m in ('PIL', 'torch', 'transformers', 'cffi') if m in sys.modules))")
        r = subprocess.run([sys.executable, "-c", code, os.path.dirname(os.path.dirname(mact.__file__)), MODEL],
                           capture_output=True, text=True, cwd=DIR)
        self.assertEqual(r.stdout.strip(), "[]", r.stderr)

    def test_kernel_names(self):
        # the kernels' names come from the library (mact_kernels_str), by value: what the header's enum says beside them
        hdr = open(os.path.join(REPO, "include", "mact.h")).read()
        enum = hdr[hdr.index("MACT_KERNELS_AUTO = 0"):hdr.index("} mact_kernels;")]
        want = re.findall(r'/\* "([^"]+)"', enum)
        lib = self.policy.library
        self.assertEqual(lib.kernel_names, dict(enumerate(want)))
        self.assertIsNone(lib.mact_kernels_str(len(want)))
        self.assertIsNone(lib.mact_kernels_str(-1))
        self.assertIn(self.policy.info.kernels, want[1:])
        with self.assertRaises(mact.InputError) as cm:
            mact.Policy.from_pretrained(MODEL, kernels="sse9")
        self.assertIn(", ".join(want), str(cm.exception))

    def test_version(self):
        hdr = open(os.path.join(REPO, "include", "mact.h")).read()
        v = re.search(r'#define MACT_VERSION_STRING "([^"]+)"', hdr).group(1)
        # the package reports the library's version: both come from include/mact.h, the one place it is stated
        self.assertEqual(self.policy.library.version, v)
        self.assertEqual(mact.__version__, self.policy.library.version)
        self.assertEqual(mact.HEADER_VERSION, tuple(int(x) for x in v.split(".")))
        # python/mact/_version.py is what make writes from the header, not a second copy kept in git
        from mact import _version
        self.assertIn("include/mact.h", _version.__doc__)
        git = subprocess.run(["git", "-C", REPO, "ls-files", "--error-unmatch", "python/mact/_version.py"],
                             capture_output=True, text=True)
        if "not a git repository" not in git.stderr:
            self.assertNotEqual(git.returncode, 0, "python/mact/_version.py is tracked: the version is stated twice")
        pyproject = open(os.path.join(REPO, "python", "pyproject.toml")).read()
        self.assertIn('dynamic = ["version"]', pyproject)
        self.assertIn('version = {attr = "mact._version.__version__"}', pyproject)
        self.assertIsNone(re.search(r'(?m)^version\s*=\s*"', pyproject), "a second version statement in pyproject.toml")

    def test_library_lookup(self):
        from mact import _lib
        self.assertIsNotNone(LIB)
        # an explicit path
        lib = mact.load_library(LIB)
        self.assertEqual(lib.path, LIB)
        with mact.Policy.from_pretrained(MODEL, library=LIB) as p:
            self.assertIs(p.library, lib)
        with self.assertRaises(mact.Error) as cm:
            mact.load_library(os.path.join(DIR, "nope.so"))
        self.assertIn("nope.so", str(cm.exception))
        # $MACT_LIBRARY, then the build tree, in fresh interpreters
        code = ("import sys; sys.path.insert(0, sys.argv[1]); import mact; print(mact.load_library().path)")
        env = dict(os.environ, MACT_LIBRARY=LIB)
        r = subprocess.run([sys.executable, "-c", code, os.path.join(REPO, "python")], capture_output=True, text=True,
                           env=env, cwd=DIR)
        self.assertEqual(r.stdout.strip(), LIB, r.stderr)
        env = dict(os.environ, MACT_LIBRARY=os.path.join(DIR, "missing.so"))
        r = subprocess.run([sys.executable, "-c", code, os.path.join(REPO, "python")], capture_output=True, text=True,
                           env=env, cwd=DIR)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("$MACT_LIBRARY", r.stderr)
        env = {k: v for k, v in os.environ.items() if k != "MACT_LIBRARY"}
        tree = os.path.join(REPO, "build", "libmact.so")
        r = subprocess.run([sys.executable, "-c", code, os.path.join(REPO, "python")], capture_output=True, text=True,
                           env=env, cwd=DIR)
        if os.path.isfile(tree):
            self.assertEqual(r.stdout.strip(), tree, r.stderr)
        self.assertEqual(_lib._package_build_tree(), tree if os.path.isfile(tree) else None)


if __name__ == "__main__":
    unittest.main()
