"""The package's exceptions."""


class IrisError(ValueError):
    """A malformed, corrupt or unsupported archive, or a wrong argument; the message names the
    file, the tensor and what is wrong."""


class CorruptError(IrisError):
    """A checksum does not match: the bytes were damaged."""


class _OpenError:
    """Mixed into the errors of opening a file, so that `except FileNotFoundError` (or
    PermissionError, or OSError) catches them as it would Python's own open(), while
    `except IrisError` still catches every error of this package. errno, strerror and filename
    are set as OSError sets them; the message stays the package's one line."""

    def __str__(self) -> str:
        # OSError.__str__ would print "[Errno 2] ...: 'path'" once filename is set.
        return str(self.args[0]) if self.args else ""


class ArchiveOpenError(_OpenError, IrisError, OSError):
    """The archive's file could not be opened or mapped (an I/O error, not its contents)."""


class ArchiveNotFoundError(ArchiveOpenError, FileNotFoundError):
    """The archive's path names no file."""


class ArchivePermissionError(ArchiveOpenError, PermissionError):
    """The archive exists but may not be read."""


def open_error(path: str, e: OSError, doing: str = "open") -> ArchiveOpenError:
    """The package's error for an OSError of opening (or mapping) `path`: of the matching
    Python class for a missing file and a refused permission, else an ArchiveOpenError."""
    kind = {FileNotFoundError: ArchiveNotFoundError, PermissionError: ArchivePermissionError}.get(type(e), ArchiveOpenError)
    err = kind(f"{path}: cannot {doing}: {e.strerror}")
    err.errno, err.strerror, err.filename = e.errno, e.strerror, path
    return err
