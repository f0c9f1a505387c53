"""`python -m iris_archive PATH` and the iris-dump script: the summary and the --json document against
`iris inspect --json` (the C++ reader's view of the same archive), --verify on a sound and a
damaged archive, and bad input: a missing file, a file that is no archive, unknown options,
each a non-zero exit with one line on stderr."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import FIXTURES, run_iris

FIXTURE_NAMES = ["gptoss-mxfp4", "llama-nf4-dq", "llama-fp8-block", "llama-bf16"]


def dump(*args, command=None):
    return subprocess.run((command or [sys.executable, "-m", "iris_archive"]) + [str(a) for a in args], capture_output=True,
                          text=True)


@pytest.mark.parametrize("fixture", FIXTURE_NAMES)
def test_json_document_equals_inspect(converted, fixture):
    path = converted(fixture)
    want = json.loads(run_iris("inspect", path, "--json").stdout)
    r = dump(path, "--json")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    got = json.loads(r.stdout)
    assert got["ok"] is True and got["verified"] is False
    for key in ("kind", "path", "format_version", "model_type", "file_bytes", "tensor_count", "tensor_bytes", "formats"):
        assert got[key] == want[key], key
    fields = ("name", "shape", "format", "dtype", "layout", "bytes")
    assert [{k: t[k] for k in fields} for t in got["tensors"]] == [{k: t[k] for k in fields} for t in want["tensors"]]
    assert [{k: f[k] for k in ("name", "bytes", "stored_bytes")} for f in got["files"]] == want["files"]
    assert all(f["bytes"] == (FIXTURES / fixture / f["name"]).stat().st_size for f in got["files"])


def test_summary_lists_every_tensor_and_file(converted):
    path = converted("gptoss-mxfp4")
    doc = json.loads(run_iris("inspect", path, "--json").stdout)
    r = dump(path)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == (f"{path}: archive v2.0, model_type gpt_oss, {doc['tensor_count']} tensors "
                        f"({doc['tensor_bytes']} bytes), {len(doc['files'])} embedded file")
    assert lines[1].split() == ["name", "shape", "format", "dtype", "bytes"]
    rows = {line.split()[0]: line for line in lines[2 : 2 + doc["tensor_count"]]}
    for t in doc["tensors"]:
        shape = "[" + ", ".join(map(str, t["shape"])) + "]"
        assert rows[t["name"]].split() == [t["name"], *shape.split(), t["format"], t["dtype"], str(t["bytes"])]
    files = lines[lines.index("embedded files:") + 2 :]
    assert [f.split() for f in files] == [[f["name"], str(f["bytes"]), str(f["stored_bytes"]), "zstd"] for f in doc["files"]]
    assert "verified" not in r.stdout


def test_verify_sound_and_damaged(converted, tmp_path):
    path = converted("llama-nf4-dq")
    r = dump(path, "--verify")
    assert r.returncode == 0 and r.stdout.rstrip().endswith("verified: every checksum matches and all padding is zero")
    assert json.loads(dump(path, "--verify", "--json").stdout)["verified"] is True
    bad = bytearray(path.read_bytes())
    bad[len(bad) // 2] ^= 0x10  # in the data section: open() does not see it, --verify must
    damaged = tmp_path / "damaged.iris"
    damaged.write_bytes(bytes(bad))
    assert dump(damaged).returncode == 0
    r = dump(damaged, "--verify")
    assert r.returncode == 4 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("python -m iris_archive: error: ") and str(damaged) in r.stderr
    assert "checksum mismatch" in r.stderr or "is not zero" in r.stderr
    assert run_iris_code(damaged) == 4  # the C++ tool's code for the same file
    doc = json.loads(dump(damaged, "--verify", "--json").stdout)
    assert doc["ok"] is False and doc["error"]["exit_code"] == 4 and doc["error"]["kind"] == "verification failed"


def run_iris_code(path) -> int:
    from conftest import IRIS

    return subprocess.run([IRIS, "verify", str(path)], capture_output=True).returncode


@pytest.mark.parametrize("case,code,kind,message", [
    ("missing", 5, "I/O error", "cannot open: No such file or directory"),
    ("not an archive", 3, "invalid input", "not an .iris archive (bad magic)"),
    ("folder", 3, "invalid input", "not a regular file"),
    ("truncated", 3, "invalid input", "truncated"),
    ("manifest flipped", 3, "corrupt data", "manifest checksum mismatch"),
])
def test_bad_input_is_one_line_and_an_exit_code(converted, tmp_path, case, code, kind, message):
    good = converted("llama-bf16").read_bytes()
    path = {"missing": tmp_path / "nowhere.iris", "not an archive": FIXTURES / "llama-bf16" / "config.json",
            "folder": tmp_path, "truncated": tmp_path / "t.iris", "manifest flipped": tmp_path / "m.iris"}[case]
    if case == "truncated":
        path.write_bytes(good[:-1])
    if case == "manifest flipped":
        path.write_bytes(good[:80] + bytes([good[80] ^ 4]) + good[81:])
    r = dump(path)
    assert r.returncode == code and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"python -m iris_archive: error: {path}") and message in r.stderr
    doc = json.loads(dump(path, "--json").stdout)
    assert doc == {"ok": False, "command": "dump", "error": {"kind": kind, "exit_code": code, "message": doc["error"]["message"]}}
    assert message in doc["error"]["message"]


def test_usage_errors(converted):
    for args in (["--no-such-flag", converted("llama-bf16")], []):
        r = dump(*args)
        assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1
        assert "see python -m iris_archive --help" in r.stderr
    doc = json.loads(dump("--no-such-flag", "--json", converted("llama-bf16")).stdout)
    assert doc["ok"] is False and doc["error"]["exit_code"] == 2 and "--no-such-flag" in doc["error"]["message"]
    r = dump("--help")
    assert r.returncode == 0 and "--verify" in r.stdout and "--json" in r.stdout


def test_a_reader_that_left_is_no_error(converted):
    """`python -m iris_archive big.iris | head -1`: the pipe's reader is gone when the summary is
    written (closed here before the child has even imported numpy). No traceback, exit 0."""
    p = subprocess.Popen([sys.executable, "-m", "iris_archive", str(converted("gptoss-mxfp4"))], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait() == 0 and err == b"", err


@pytest.mark.skipif(not os.environ.get("IRIS_EXPECT_INSTALLED"), reason="run from the source tree: no scripts installed")
def test_the_iris_dump_script_is_installed_and_is_the_same_command(converted):
    script = shutil.which("iris-dump", path=os.path.dirname(sys.executable))
    assert script, f"no iris-dump beside {sys.executable}"
    path = converted("llama-fp8-block")
    by_script, by_module = dump(path, command=[script]), dump(path)
    assert by_script.returncode == 0 and by_script.stdout == by_module.stdout
    r = dump(path.parent / "nowhere.iris", command=[script])
    assert r.returncode == 5 and r.stderr.startswith("iris-dump: error: ")
