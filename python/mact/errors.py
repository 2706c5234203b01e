"""mact's exceptions: one per mact_status, all subclasses of mact.Error."""
import enum


class Status(enum.IntEnum):
    """mact_status (include/mact.h)."""
    OK = 0
    ERR_IO = -1           # file missing or unreadable
    ERR_FORMAT = -2       # malformed file (safetensors, json, npz)
    ERR_MODEL = -3        # checkpoint inconsistent with its config
    ERR_INPUT = -4        # caller input rejected: shape, NaN, range, NULL, unknown name
    ERR_NOMEM = -5
    ERR_UNSUPPORTED = -6  # a valid choice this build does not implement


class Error(Exception):
    """A mact error: ``.status`` (a Status, or None when the status is unknown) and ``.message`` (the library's
    text, or the binding's for what it checks itself: shapes and dtypes of arrays, a closed policy)."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.message = message
        self.status = None if status is None else _status(status)

    def __str__(self):
        return self.message


def _status(code):
    try:
        return Status(code)
    except ValueError:
        return code


class FileError(Error, OSError):
    """MACT_ERR_IO: a file missing or unreadable (also an OSError)."""


class FormatError(Error):
    """MACT_ERR_FORMAT: a malformed file."""


class ModelError(Error):
    """MACT_ERR_MODEL: a checkpoint inconsistent with its config."""


class InputError(Error, ValueError):
    """MACT_ERR_INPUT: an input rejected (also a ValueError)."""


class NoMemoryError(Error, MemoryError):
    """MACT_ERR_NOMEM."""


class UnsupportedError(Error, NotImplementedError):
    """MACT_ERR_UNSUPPORTED: a valid choice this build does not implement."""


class ClosedError(InputError):
    """A call on a closed Policy or Session (C would be handed a freed handle; the binding refuses first)."""


_BY_STATUS = {Status.ERR_IO: FileError, Status.ERR_FORMAT: FormatError, Status.ERR_MODEL: ModelError,
              Status.ERR_INPUT: InputError, Status.ERR_NOMEM: NoMemoryError,
              Status.ERR_UNSUPPORTED: UnsupportedError}


def error(status, message):
    """The exception for a failed call: the class of its status, carrying the library's message."""
    cls = _BY_STATUS.get(_status(status), Error)
    return cls(message or f"mact error {int(status)} (no message)", status)


def input_error(message):
    return InputError(message, Status.ERR_INPUT)
