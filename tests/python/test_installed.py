"""The copy `pip install --target` made, imported with no MACT_LIBRARY: libmact comes from the system loader
path (LD_LIBRARY_PATH here), and predict_action still equals `mact run`."""
import os
import unittest

from common import PACKAGE, STATE, TASK, bitwise_equal, frame, frame_files, mact, mact_run, MODEL


class Installed(unittest.TestCase):
    def test_imported_from_target(self):
        self.assertTrue(os.environ.get("MACT_PY_INSTALLED"))
        self.assertEqual(os.path.dirname(os.path.dirname(os.path.abspath(mact.__file__))), os.path.abspath(PACKAGE))
        self.assertNotIn("MACT_LIBRARY", os.environ)
        lib = mact.load_library()
        self.assertFalse(os.path.isabs(lib.path), lib.path)  # a soname, resolved by the loader

    def test_predict_from_installed_copy(self):
        files = [frame_files(0, ("npy",))["npy"], frame_files(1, ("npy",))["npy"]]
        ref, err, _ = mact_run(files, extra=["--seed", "77"])
        self.assertIsNotNone(ref, err)
        with mact.Policy.from_pretrained(MODEL) as p:
            out = p.predict_action(images=[frame(0), frame(1)], task=TASK, state=STATE, seed=77)
        self.assertTrue(bitwise_equal(out.actions[0], ref))


if __name__ == "__main__":
    unittest.main()
