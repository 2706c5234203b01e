"""The copy `pip install --target` made, imported with no MACT_LIBRARY: libmact and the toolkits' libraries come
from the system loader path (LD_LIBRARY_PATH here), every module of python/mact was installed, the installed
version is include/mact.h's, and predict_action still equals `mact run`."""
import glob
import os
import re
import unittest

from common import DIR, REPO, PACKAGE, STATE, TASK, bitwise_equal, frame, frame_files, mact, mact_run, MODEL


class Installed(unittest.TestCase):
    def test_imported_from_target(self):
        self.assertTrue(os.environ.get("MACT_PY_INSTALLED"))
        self.assertEqual(os.path.dirname(os.path.dirname(os.path.abspath(mact.__file__))), os.path.abspath(PACKAGE))
        self.assertNotIn("MACT_LIBRARY", os.environ)
        lib = mact.load_library()
        self.assertFalse(os.path.isabs(lib.path), lib.path)  # a soname, resolved by the loader

    def test_installed_modules_and_version(self):
        src = sorted(os.path.basename(f) for f in glob.glob(os.path.join(REPO, "python", "mact", "*.py")))
        got = sorted(os.path.basename(f) for f in glob.glob(os.path.join(PACKAGE, "mact", "*.py")))
        self.assertEqual(got, src)
        for m in ("datasets.py", "stats.py", "eval.py", "prune.py", "_toolkits.py", "_version.py"):
            self.assertIn(m, got)
        v = re.search(r'#define MACT_VERSION_STRING "([^"]+)"', open(os.path.join(REPO, "include", "mact.h")).read())
        dist = glob.glob(os.path.join(PACKAGE, "mact-*.dist-info"))
        self.assertEqual([os.path.basename(d) for d in dist], [f"mact-{v.group(1)}.dist-info"])
        self.assertEqual(mact.__version__, v.group(1))

    def test_toolkits_from_loader_path(self):
        from mact import datasets, prune
        for name in ("MACT_DATA_LIBRARY", "MACT_COMPRESS_LIBRARY"):
            self.assertNotIn(name, os.environ)
        for lib in (datasets.load_library(), prune.load_library()):
            self.assertFalse(os.path.isabs(lib.path), lib.path)
            self.assertEqual(lib.version, mact.__version__)
        with self.assertRaises(mact.Error):
            datasets.open(os.path.join(DIR, "no_dataset"))

    def test_predict_from_installed_copy(self):
        files = [frame_files(0, ("npy",))["npy"], frame_files(1, ("npy",))["npy"]]
        ref, err, _ = mact_run(files, extra=["--seed", "77"])
        self.assertIsNotNone(ref, err)
        with mact.Policy.from_pretrained(MODEL) as p:
            out = p.predict_action(images=[frame(0), frame(1)], task=TASK, state=STATE, seed=77)
        self.assertTrue(bitwise_equal(out.actions[0], ref))


if __name__ == "__main__":
    unittest.main()
