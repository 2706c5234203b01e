"""The toolkit modules (mact.datasets, mact.stats, mact.eval, mact.prune over libmact_data.so and
libmact_compress.so) against the CLI on the same inputs: synthetic LeRobot datasets (`mact synth-dataset`: PNG
cameras in the parquet, and H.264 video cameras) and the `mact synth tiny` checkpoint. Equal means: the report
text and the decoded frames bit for bit (the PNG `mact dataset frame` writes), norm_stats.json and result.json as
dicts (and per-step MAE), pruned and synthesized checkpoints byte for byte, the SNR and distillation numbers as the
CLI's --json states them."""
import filecmp
import json
import math
import os
import re
import shutil
import subprocess
import unittest

import numpy as np

from common import DIR, MACT_BIN, MODEL, REPO, check_struct_layouts, mact

from mact import _toolkits, datasets, prune, stats
from mact import eval as mact_eval

T = os.path.join(DIR, "toolkits")


def cli(*args, ok=True):
    r = subprocess.run([MACT_BIN, *map(str, args)], capture_output=True, text=True)
    if ok and r.returncode:
        raise AssertionError(f"mact {' '.join(map(str, args))} exited {r.returncode}: {r.stderr.strip()[-400:]}")
    return r


def same_tree(a, b):
    """The relative paths under a and b, and those whose bytes differ."""
    files = lambda d: sorted(os.path.relpath(os.path.join(r, f), d) for r, _, fs in os.walk(d) for f in fs)  # noqa
    fa, fb = files(a), files(b)
    return fa, fb, [f for f in fa if f in fb and not filecmp.cmp(os.path.join(a, f), os.path.join(b, f), shallow=False)]


class Toolkits(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        shutil.rmtree(T, ignore_errors=True)
        os.makedirs(T)
        cls.lib = os.path.join(T, "lib")     # LIBERO-like, v3.0, PNG cameras in the parquet
        cls.vid = os.path.join(T, "vid")     # v3.0, H.264 camera videos
        cls.ck = os.path.join(T, "ck")       # the tiny checkpoint with norm stats of cls.lib
        cli("synth-dataset", cls.lib, "--version", "v3.0", "--robot", "libero", "--episodes", 4, "--len", "20:30",
            "--seed", 3)
        cli("synth-dataset", cls.vid, "--version", "v3.0", "--robot", "libero", "--episodes", 2, "--len", "8:8",
            "--video", "h264", "--seed", 4)
        shutil.copytree(MODEL, cls.ck)
        cli("stats", "--dataset", cls.lib, "--tag", "libero", "--out", os.path.join(cls.ck, "norm_stats.json"))

    def test_struct_layouts(self):
        # sizes and field offsets of every toolkit struct, as the C compiler lays them out
        check_struct_layouts(self, _toolkits.STRUCTS, ["mact_data.h", "mact_compress.h"])

    def test_versions(self):
        hdr = open(os.path.join(REPO, "include", "mact.h")).read()
        v = re.search(r'#define MACT_VERSION_STRING "([^"]+)"', hdr).group(1)
        self.assertEqual(datasets.load_library().version, v)
        self.assertEqual(prune.load_library().version, v)
        # the environment variable names the library, as MACT_LIBRARY does for libmact
        if os.environ.get("MACT_DATA_LIBRARY"):
            self.assertEqual(datasets.load_library().path, os.environ["MACT_DATA_LIBRARY"])
        with self.assertRaises(mact.Error) as cm:
            datasets.load_library(os.path.join(T, "nope.so"))
        self.assertIn("libmact_data", str(cm.exception))
        with self.assertRaises(mact.Error) as cm:  # libmact.so is not a toolkit
            prune.load_library(os.environ.get("MACT_LIBRARY") or mact.load_library().path)
        self.assertIn("is not libmact_compress", str(cm.exception))

    def test_dataset_report_and_info(self):
        for ds in (self.lib, self.vid):
            text, problems = datasets.report(ds)
            r = cli("dataset", "info", ds)
            self.assertEqual(text, r.stdout, ds)
            self.assertEqual(problems, 0)
            meta = json.load(open(os.path.join(ds, "meta", "info.json")))
            i = datasets.info(ds)
            self.assertEqual((i["version"], i["fps"], i["n_episodes"], i["info_total_frames"]),
                             (meta["codebase_version"], meta["fps"], meta["total_episodes"], meta["total_frames"]))
            self.assertEqual([f["key"] for f in i["features"]], list(meta["features"]))
            self.assertEqual(i["n_frames"], sum(e["length"] for e in i["episodes"]))
            self.assertEqual(len(i["cameras"]), 2)
            for f in i["features"]:
                self.assertEqual(f["shape"], meta["features"][f["key"]]["shape"], f["key"])
                names = meta["features"][f["key"]].get("names") or []
                if isinstance(names, dict):  # {"motors": [...]}: LeRobot's older form, one list
                    names = next(iter(names.values()))
                self.assertEqual(f["names"], names, f["key"])
            with datasets.open(ds) as d:
                self.assertEqual(d.check(), [])

    def test_dataset_frames_bitwise(self):
        from PIL import Image
        n = 0
        for ds in (self.lib, self.vid):
            with datasets.open(ds) as d:
                for pos in (0, len(d.episodes) - 1):
                    ep = d.episodes[pos]
                    for cam in d.cameras:
                        for t in (0, ep["length"] - 1):
                            png = os.path.join(T, "frame.png")
                            cli("dataset", "frame", ds, "--episode", ep["index"], "--index", t, "--camera", cam,
                                "--out", png)
                            want = np.asarray(Image.open(png).convert("RGB"))
                            got, fi = d.frame(pos, t, cam, with_info=True)
                            self.assertEqual(got.dtype, np.uint8)
                            self.assertEqual(got.shape, want.shape)
                            self.assertTrue(np.array_equal(got, want), f"{ds} episode {ep['index']} {cam} frame {t}")
                            self.assertEqual(fi["from_video"], ds == self.vid)
                            if fi["from_video"]:  # the number the synthesizer drew into it
                                num = synth_frame_number(got)
                                self.assertEqual(num & 4095, t)
                                self.assertEqual((num >> 12) & 255, ep["index"] & 255)
                            n += 1
                self.assertEqual(d.position(d.episodes[-1]["index"]), len(d.episodes) - 1)
                with self.assertRaises(mact.InputError):
                    d.frame(0, 10 ** 6, d.cameras[0])
                with self.assertRaises(mact.Error):
                    d.frame(0, 0, "observation.images.nope")
        self.assertEqual(n, 16)

    def test_dataset_read_matches_dump(self):
        with datasets.open(self.lib) as d:
            ep = d.episodes[1]
            a = d.read(1, "action")
            s = d.read(1, "observation.state")
            self.assertEqual(a.shape, (ep["length"], 7))
            self.assertEqual(s.shape, (ep["length"], 8))
            files = sorted(os.path.join(r, f) for r, _, fs in os.walk(os.path.join(self.lib, "data")) for f in fs
                           if f.endswith(".parquet"))
            rows = [row for f in files for row in datasets.dump_parquet(f)]
            self.assertEqual(datasets.dump_parquet(files[0]), json.loads(cli("dataset", "dump", files[0]).stdout))
            mine = sorted((r for r in rows if r["episode_index"] == ep["index"]), key=lambda r: r["frame_index"])
            self.assertTrue(np.array_equal(a, np.array([r["action"] for r in mine], np.float64)))
            self.assertTrue(np.array_equal(s, np.array([r["observation.state"] for r in mine], np.float64)))
            with self.assertRaises(mact.Error) as cm:
                d.read(0, "nope")
            self.assertIn("nope", str(cm.exception))
        d.close()
        with self.assertRaises(mact.ClosedError):
            d.read(0, "action")

    def test_stats_equal_cli(self):
        for method in ("lerobot", "exact"):
            a, b = os.path.join(T, f"ns_cli_{method}.json"), os.path.join(T, f"ns_py_{method}.json")
            shutil.copy(os.path.join(MODEL, "norm_stats.json"), a)
            shutil.copy(a, b)
            cli("stats", "--dataset", self.lib, "--dataset", self.vid, "--tag", "libero", "--method", method,
                "--horizon", 12, "--out", a)
            r = stats.compute([self.lib, self.vid], "libero", b, method=method, horizon=12)
            self.assertEqual(r["norm_stats"], json.load(open(a)), method)
            self.assertEqual(open(a, "rb").read(), open(b, "rb").read(), method)
            self.assertEqual(r["frames"], sum(datasets.info(x)["n_frames"] for x in (self.lib, self.vid)))
        # a new file, in memory
        r = stats.compute(self.lib, "mine", method="exact")
        self.assertIsNone(r["out"])
        self.assertIn("mine", r["norm_stats"]["metadata_by_tag"])
        with self.assertRaises(mact.InputError):
            stats.compute(self.lib, "x", method="median")
        with self.assertRaises(mact.Error) as cm:
            stats.compute(os.path.join(T, "missing"), "x")
        self.assertIn("missing", str(cm.exception))

    def _result_equal(self, py, cli_dir):
        want = json.load(open(os.path.join(cli_dir, "result.json")))
        self.assertEqual(py.result, want)
        # result.json's numbers are cJSON's text, which rounds to 15 digits when that reads back within its
        # epsilon: the in-memory values equal to that precision
        for got, key in ((py.per_step_mae, "mae_per_step"), (py.hold_per_step_mae, "hold_mae_per_step")):
            self.assertEqual(got.shape, (len(want[key]),), key)
            np.testing.assert_allclose(got, want[key], rtol=1e-14, atol=0, err_msg=key)
        self.assertEqual(py.frames, want["frames_evaluated"])
        self.assertEqual(py.horizon, len(want["mae_per_step"]))

    def test_eval_run_equal_cli(self):
        c, p = os.path.join(T, "ev_cli"), os.path.join(T, "ev_py")
        out = cli("eval", "--dataset", self.lib, "--model", self.ck, "--episodes", "0:2", "--seed", 5, "--first-k",
                  "3,10", "--out", c).stdout
        r = mact_eval.run(self.lib, p, self.ck, episodes=range(0, 2), seed=5, first_k=[3, 10])
        self._result_equal(r, c)
        self.assertEqual(r.policy, "model")
        self.assertEqual(r.trajectories, {})
        self.assertEqual(r.report, out)
        self.assertEqual(open(os.path.join(c, "episodes.jsonl")).read(), open(os.path.join(p, "episodes.jsonl")).read())
        # hold-still without a model: the norm stats alone
        c, p = os.path.join(T, "hold_cli"), os.path.join(T, "hold_py")
        ns = os.path.join(self.ck, "norm_stats.json")
        cli("eval", "--dataset", self.lib, "--norm-stats", ns, "--policy", "hold", "--out", c)
        self._result_equal(mact_eval.run(self.lib, p, norm_stats=ns, policy="hold"), c)
        with self.assertRaises(mact.InputError):
            mact_eval.run(self.lib, p, self.ck, policy="nope")
        with self.assertRaises(mact.InputError):
            mact_eval.run(self.lib, p, self.ck, delay=2)
        with self.assertRaises(mact.InputError) as cm:
            mact_eval.run(self.lib, p, self.ck, policy="hold", replan=3)
        self.assertIn("--replan needs --policy model", str(cm.exception))

    def test_eval_replan_equal_cli(self):
        c, p = os.path.join(T, "rp_cli"), os.path.join(T, "rp_py")
        cli("eval", "--dataset", self.lib, "--model", self.ck, "--episodes", "1", "--seed", 2, "--replan", 4,
            "--delay", 1, "--out", c)
        r = mact_eval.run(self.lib, p, self.ck, episodes=[1], seed=2, replan=4, delay=1)
        self._result_equal(r, c)
        self.assertEqual(sorted(r.trajectories), ["with_rtc", "without_rtc"])
        tr = r.trajectories["with_rtc"]
        self.assertEqual((tr["episode_index"], tr["replan"], tr["delay"]), (1, 4, 1))
        self.assertEqual(tr["actions"].shape[1], 7)

    def test_eval_merge_equal_cli(self):
        ns = os.path.join(self.ck, "norm_stats.json")
        py_dirs, cli_dirs = [], []
        for i in range(3):
            py_dirs.append(os.path.join(T, f"sh_py{i}"))
            cli_dirs.append(os.path.join(T, f"sh_cli{i}"))
            mact_eval.run(self.lib, py_dirs[-1], norm_stats=ns, policy="hold", shard=(i, 3))
            cli("eval", "--dataset", self.lib, "--norm-stats", ns, "--policy", "hold", "--shard", f"{i}/3", "--out",
                cli_dirs[-1])
        mc, mp = os.path.join(T, "merged_cli"), os.path.join(T, "merged_py")
        cli("eval", "merge", "--out", mc, *cli_dirs)
        r = mact_eval.merge(mp, py_dirs)
        self._result_equal(r, mc)
        # equal to the unsharded run
        whole = mact_eval.run(self.lib, os.path.join(T, "whole_py"), norm_stats=ns, policy="hold")
        self.assertEqual(r.result, whole.result)
        with self.assertRaises(mact.Error):
            mact_eval.merge(os.path.join(T, "partial"), py_dirs[:2])
        self.assertEqual(mact_eval.merge(os.path.join(T, "partial2"), py_dirs[:2], allow_partial=True).policy, "hold")
        self.assertIsNone(mact_eval.shard_from_env())

    def test_prune_byte_identical(self):
        for keep, taps in (([0, 2], [-1, -2]), ([1, 2], None)):
            name = "_".join(map(str, keep)) + ("_t" if taps else "")
            c, p = os.path.join(T, f"pr_cli_{name}"), os.path.join(T, f"pr_py_{name}")
            args = ["prune", "--model", self.ck, "--keep", ",".join(map(str, keep)), "--out", c]
            if taps:
                args.append("--taps=" + ",".join(map(str, taps)))
            cli(*args)
            log = prune.prune(self.ck, keep, p, taps=taps)
            self.assertTrue(log.strip())
            fa, fb, diff = same_tree(c, p)
            self.assertEqual(fa, fb)
            self.assertGreaterEqual(len(fa), 4)
            self.assertEqual(diff, [], name)
        with self.assertRaises(mact.Error) as cm:  # out exists
            prune.prune(self.ck, [0, 1], p)
        with self.assertRaises(mact.Error):
            prune.prune(self.ck, [7], os.path.join(T, "pr_bad"))
        self.assertFalse(os.path.exists(os.path.join(T, "pr_bad")))

    def test_prune_analyze_equal_cli(self):
        jc, jp = os.path.join(T, "snr_cli.json"), os.path.join(T, "snr_py.json")
        cli("prune-analyze", "--model", self.ck, "--dataset", self.lib, "--frames", 4, "--target-depth", 2, "--json", jc)
        a = prune.analyze(self.ck, dataset=self.lib, frames=4, target_depth=2, json_path=jp)
        want = json.load(open(jc))
        self.assertEqual(open(jc, "rb").read(), open(jp, "rb").read())
        self.assertEqual(a.result, want)
        self.assertEqual(a.blocks, want["blocks"])
        self.assertEqual(a.images, want["images"])
        self.assertEqual([None if math.isinf(x) else x for x in a.snr_db.tolist()], want["snr_db"])
        self.assertEqual(a.keep, want["keep"])
        self.assertEqual(a.student_taps, want["student_taps"])
        self.assertEqual(int(a.kept.sum()), 2)
        # image files too
        imgs = [os.path.join(T, f"img{k}.png") for k in range(2)]
        with datasets.open(self.lib) as d:
            from PIL import Image
            for k, f in enumerate(imgs):
                Image.fromarray(d.frame(k, 0, d.cameras[0])).save(f)
        cli("prune-analyze", "--model", self.ck, "--image", imgs[0], "--image", imgs[1], "--json", jc)
        a = prune.analyze(self.ck, imgs)
        self.assertEqual(a.result, json.load(open(jc)))
        self.assertEqual(a.keep, [])
        with self.assertRaises(mact.InputError):
            prune.analyze(self.ck)

    def test_distill_eval_equal_cli(self):
        student = os.path.join(T, "student")
        prune.prune(self.ck, [0, 2], student, taps=[-1, -2])
        jc, jp = os.path.join(T, "d_cli.json"), os.path.join(T, "d_py.json")
        cli("distill-eval", "--teacher", self.ck, "--student", student, "--dataset", self.lib, "--frames", 3, "--json", jc)
        r = prune.distill_eval(self.ck, student, dataset=self.lib, frames=3, json_path=jp)
        want = json.load(open(jc))
        self.assertEqual(json.load(open(jp)), want)
        o = want.get("overall", want)
        for k in ("cos_token", "cos_flat", "rel_mse"):
            self.assertEqual(r[k], o[k], k)
        self.assertEqual(r["n_images"], 3)
        self.assertFalse(r["identical"])
        same = prune.distill_eval(self.ck, self.ck, dataset=self.lib, frames=2)
        self.assertTrue(same["identical"])
        self.assertEqual(same["cos_token"], 1.0)

    def test_analyses_take_a_policy(self):
        # the analyses run the Policy given, at its precision: fp32's numbers as the CLI's default fp32 run
        jc = os.path.join(T, "snr_cli2.json")
        cli("prune-analyze", "--model", self.ck, "--dataset", self.lib, "--frames", 2, "--json", jc)
        with mact.Policy.from_pretrained(self.ck, precision="fp32") as p:
            a = prune.analyze(p, dataset=self.lib, frames=2)
            self.assertEqual(a.result, json.load(open(jc)))
            same = prune.distill_eval(p, p, dataset=self.lib, frames=2)
        self.assertTrue(same["identical"])

    def test_dataset_errors(self):
        with self.assertRaises(mact.Error) as cm:
            datasets.open(os.path.join(T, "no_such_dataset"))
        self.assertIn("no_such_dataset", str(cm.exception))
        r = cli("dataset", "info", os.path.join(T, "no_such_dataset"), ok=False)
        self.assertIn(str(cm.exception), r.stderr)


def synth_frame_number(rgb):
    """The number `mact synth-dataset --video` draws into a frame (camera << 20 | episode << 12 | frame), read back
    from the frame as the synthesizer lays it out: 32 cells (8 columns of w/8, 4 rows of (h/6) & ~1), each bright or
    dark over its inner half; 24 bits of number and a CRC-8 (poly 0x07, the number's 3 bytes high first)."""
    h, w, _ = rgb.shape
    cw, ch = w // 8, (h // 6) & ~1
    bits = 0
    for i in range(32):
        x0, y0 = (i % 8) * cw + cw // 4, (i // 8) * ch + ch // 4
        cell = rgb[y0:y0 + ch // 2, x0:x0 + cw // 2].astype(np.int64)
        bits = bits << 1 | int(cell.sum() > cell.size * 128)
    v, crc = bits >> 8, 0
    for i in (2, 1, 0):
        crc ^= (v >> (8 * i)) & 0xFF
        for _ in range(8):
            crc = ((crc << 1) ^ 0x07) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return v if crc == bits & 0xFF else None


if __name__ == "__main__":
    unittest.main()
