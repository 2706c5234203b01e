"""Runs tests/python/test_*.py (unittest, the standard library only) and prints one `PASS name` or
`FAIL name: why` line per test, as tests/run.sh reads them. Exits non-zero when any failed.

    runner.py [MODULE...]     (default: every tests/python/test_*.py but test_installed)

The tests read their fixtures from the environment tests/test_python.sh sets up (common.py)."""
import os
import sys
import traceback
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


class LineResult(unittest.TestResult):
    def _name(self, test):
        return f"py_{test.__class__.__module__.replace('test_', '')}.{test._testMethodName}"

    def addSuccess(self, test):
        super().addSuccess(test)
        print(f"PASS {self._name(test)}", flush=True)

    def _fail(self, test, err, kind):
        lines = "".join(traceback.format_exception(*err)).strip().splitlines()
        print(f"FAIL {self._name(test)}: {kind} {lines[-1] if lines else ''}", flush=True)
        print("\n".join("    " + x for x in lines), flush=True)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._fail(test, err, "assertion:")

    def addError(self, test, err):
        super().addError(test, err)
        self._fail(test, err, "error:")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        print(f"INFO {self._name(test)} skipped: {reason}", flush=True)


def main(argv):
    # test_installed runs only on the pip-installed copy (tests/test_python.sh names it)
    names = argv or sorted(f[:-3] for f in os.listdir(HERE)
                           if f.startswith("test_") and f.endswith(".py") and f != "test_installed.py")
    suite = unittest.TestSuite()
    loader = unittest.TestLoader()
    for n in names:
        suite.addTests(loader.loadTestsFromName(n))
    result = LineResult()
    suite.run(result)
    return 0 if result.wasSuccessful() and result.testsRun else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
