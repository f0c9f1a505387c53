"""What a CI job reads from iris: `verify --junit` parsed by a JUnit consumer (here the
standard library's XML parser, checking the structure JUnit readers rely on), and `--json`
documents on stdout for failures as well as successes (docs/JSON.md)."""

import json
import subprocess
import xml.etree.ElementTree as ET

from conftest import FIXTURES, IRIS


def iris(*args):
    return subprocess.run([IRIS, *map(str, args)], capture_output=True, text=True)


def junit(path):
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1
    cases = suites[0].findall("testcase")
    failures = [c for c in cases if c.find("failure") is not None]
    assert int(root.get("tests")) == int(suites[0].get("tests")) == len(cases)
    assert int(root.get("failures")) == int(suites[0].get("failures")) == len(failures)
    return cases, failures


def test_junit_of_a_good_and_of_a_corrupted_archive(converted, tmp_path):
    path = converted("llama-nf4-dq")
    r = iris("verify", path, "--junit", tmp_path / "ok.xml")
    assert r.returncode == 0, r.stderr
    cases, failures = junit(tmp_path / "ok.xml")
    assert failures == [] and len(cases) > 20
    assert any(c.get("name") == "checksum:absmax" for c in cases)
    # An existing report is kept without --force.
    assert iris("verify", path, "--junit", tmp_path / "ok.xml").returncode == 2
    bad = bytearray(path.read_bytes())
    bad[len(bad) // 2] ^= 0x10
    (tmp_path / "bad.iris").write_bytes(bytes(bad))
    r = iris("verify", tmp_path / "bad.iris", "--junit", tmp_path / "bad.xml")
    assert r.returncode == 4
    cases, failures = junit(tmp_path / "bad.xml")
    assert len(failures) == 1 and "data corrupted" in failures[0].find("failure").get("message")
    # Not an archive at all: one failing "open" case.
    r = iris("verify", FIXTURES / "llama-bf16" / "config.json", "--junit", tmp_path / "open.xml")
    assert r.returncode == 3
    cases, failures = junit(tmp_path / "open.xml")
    assert [c.get("name") for c in failures] == ["open"]


def test_json_errors_on_stdout(tmp_path):
    # A missing input is an I/O error (5) in every command.
    for args, code in [(("convert", tmp_path / "nowhere", "-o", tmp_path / "a.iris", "--json"), 5),
                       (("inspect", tmp_path / "nowhere", "--json"), 5),
                       (("verify", FIXTURES / "llama-bf16" / "config.json", "--json"), 3),
                       (("export", tmp_path / "nowhere.iris", "-o", tmp_path / "x.safetensors", "--json"), 5),
                       (("convert", "--no-such-flag", "--json"), 2)]:
        r = iris(*args)
        assert r.returncode == code, (args, r.stderr)
        doc = json.loads(r.stdout)
        assert doc["ok"] is False and doc["error"]["exit_code"] == code and doc["error"]["message"], doc
        assert r.stderr.startswith("iris: error: ") or code == 2


def test_json_success_documents(converted, tmp_path):
    r = iris("convert", FIXTURES / "llama-bf16", "-o", tmp_path / "a.iris", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["ok"] is True
    assert json.loads(iris("inspect", tmp_path / "a.iris", "--json").stdout)["ok"] is True
    r = iris("export", tmp_path / "a.iris", "-o", tmp_path / "a.safetensors", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["tensors"] > 0
    # The one-line summary reaches logs that are not terminals.
    r = iris("convert", FIXTURES / "llama-bf16", "-o", tmp_path / "b.iris")
    assert r.returncode == 0 and "wrote " in r.stderr
