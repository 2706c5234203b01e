"""The version of the headers this binding mirrors: include/mact.h's MACT_VERSION_STRING, the one source of the
Python package's version (pyproject.toml reads it; tests/python/test_lowlevel.py::test_version fails when the two
disagree)."""
__version__ = "0.3.0"
