"""The package's exceptions."""


class IrisError(ValueError):
    """A malformed, corrupt or unsupported archive, or a wrong argument; the message names the
    file, the tensor and what is wrong."""


class CorruptError(IrisError):
    """A checksum does not match: the bytes were damaged."""
