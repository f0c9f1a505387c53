"""`python -m iris_archive PATH` and `iris-dump PATH`: what an archive holds, read by this package
alone (no C++ tool needed): its tensors (name, shape, format, dtype, bytes) and embedded files,
as text or, with --json, as one JSON document; --verify checks every checksum too.

Exit codes and the JSON error document follow the iris command line (README "Exit codes",
docs/JSON.md): 0 success, 2 usage, 3 invalid or corrupt archive, 4 verification failed,
5 I/O error (a missing file); an error is one line on stderr."""

from __future__ import annotations

import argparse
import json
import os
import sys

from ._archive import open as open_archive
from ._errors import ArchiveOpenError, CorruptError, IrisError
from ._jsontext import shown

USAGE, INVALID, VERIFY_FAILED, IO_ERROR = 2, 3, 4, 5


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse would print the usage and exit; main reports it in one line
        raise _UsageError(message)


def _parser(prog: str) -> argparse.ArgumentParser:
    p = _Parser(prog=prog, description="List the tensors and embedded files of a .iris archive.")
    p.add_argument("path", metavar="PATH", help="the .iris archive")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout (also for errors)")
    p.add_argument("--verify", action="store_true",
                   help="hash every component and embedded file and check the padding (as `iris verify`)")
    return p


def describe(a, verified: bool) -> dict:
    """The --json document of open archive `a` (keys as `iris inspect --json` names them)."""
    tensors = [{"name": t.name, "shape": list(t.shape), "format": t.format, "dtype": t.dtype, "layout": dict(t.layout),
                "bytes": t.nbytes} for t in a.tensors.values()]
    files = []
    for name in a.files:
        f = a.files.info(name)
        files.append({"name": name, "bytes": f["raw_bytes"], "stored_bytes": f["bytes"], "encoding": f["encoding"]})
    formats: dict = {}
    for t in tensors:
        formats[t["format"]] = formats.get(t["format"], 0) + 1
    return {"ok": True, "kind": "archive", "path": a.path, "format_version": "%d.%d" % a.version,
            "model_type": a.model_type, "file_bytes": os.path.getsize(a.path), "tensor_count": len(tensors),
            "tensor_bytes": sum(t["bytes"] for t in tensors), "formats": formats, "verified": verified,
            "tensors": tensors, "files": files}


def _table(header: tuple, rows: list, right: set) -> list:
    """Aligned columns; those in `right` (numbers) right-aligned."""
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    cell = lambda r, i: r[i].rjust(widths[i]) if i in right else r[i].ljust(widths[i])  # noqa: E731
    return ["  ".join(cell(r, i) for i in range(len(header))).rstrip() for r in [header] + rows]


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def summary(doc: dict) -> str:
    """The text form of describe()'s document."""
    lines = [f"{shown(doc['path'])}: archive v{doc['format_version']}, model_type {doc['model_type'] or '(none)'}, "
             f"{_count(doc['tensor_count'], 'tensor')} ({doc['tensor_bytes']} bytes), {_count(len(doc['files']), 'embedded file')}"]
    rows = [(shown(t["name"]), "[" + ", ".join(map(str, t["shape"])) + "]", t["format"], t["dtype"], str(t["bytes"]))
            for t in doc["tensors"]]
    lines += _table(("name", "shape", "format", "dtype", "bytes"), rows, {4})
    if doc["files"]:
        lines += ["", "embedded files:"]
        rows = [(shown(f["name"]), str(f["bytes"]), str(f["stored_bytes"]), f["encoding"]) for f in doc["files"]]
        lines += _table(("name", "bytes", "stored", "encoding"), rows, {1, 2})
    if doc["verified"]:
        lines += ["", "verified: every checksum matches and all padding is zero"]
    return "\n".join(lines) + "\n"


def _error(prog: str, as_json: bool, code: int, kind: str, message: str) -> int:
    """Reports an error as the iris command line does; returns the exit code."""
    message = " ".join(message.splitlines())  # one line, whatever the message holds
    if as_json:
        doc = {"ok": False, "command": "dump", "error": {"kind": kind, "exit_code": code, "message": message}}
        sys.stdout.write(json.dumps(doc) + "\n")
    sys.stderr.write(f"{prog}: error: {message}\n")
    return code


def main(argv=None, prog: str = "iris-dump") -> int:
    """Runs the command on argv (default sys.argv[1:]); returns the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = _parser(prog)
    try:
        args = parser.parse_args(argv)
    except _UsageError as e:
        return _error(prog, "--json" in argv, USAGE, "invalid argument", f"{e} (see {prog} --help)")
    stage = "open"
    try:
        with open_archive(args.path) as a:
            if args.verify:
                stage = "verify"
                a.verify()
            doc = describe(a, args.verify)
    except ArchiveOpenError as e:
        return _error(prog, args.json, IO_ERROR, "I/O error", str(e))
    except CorruptError as e:
        if stage == "verify":
            return _error(prog, args.json, VERIFY_FAILED, "verification failed", str(e))
        return _error(prog, args.json, INVALID, "corrupt data", str(e))
    except IrisError as e:
        return _error(prog, args.json, INVALID, "invalid input", str(e))
    try:
        sys.stdout.write(json.dumps(doc, indent=1) + "\n" if args.json else summary(doc))
        sys.stdout.flush()
    except BrokenPipeError:  # `python -m iris_archive big.iris | head`: the reader left, not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the flush at exit does not fail again
    return 0
