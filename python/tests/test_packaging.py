"""What `pip install ./python` puts in place: every module of the source tree (subpackages
included), py.typed (PEP 561: the annotations are for type checkers), and nothing less."""

import importlib.resources
import os
from pathlib import Path

import pytest

import iris_archive as iris

SOURCE = Path(__file__).resolve().parents[1] / "iris_archive"


def test_py_typed_ships_with_the_package():
    assert importlib.resources.files("iris_archive").joinpath("py.typed").is_file()


@pytest.mark.skipif(not os.environ.get("IRIS_EXPECT_INSTALLED"), reason="run from the source tree")
def test_the_installed_package_holds_every_source_module():
    installed = Path(iris.__file__).parent
    assert installed != SOURCE
    want = sorted(str(p.relative_to(SOURCE)) for p in SOURCE.rglob("*.py") if "__pycache__" not in p.parts)
    got = sorted(str(p.relative_to(installed)) for p in installed.rglob("*.py") if "__pycache__" not in p.parts)
    assert got == want
    assert (installed / "py.typed").is_file()


def _backend():
    """python/_build/iris_wheel.py, the package's PEP 517 backend, imported from the source tree."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "_build" / "iris_wheel.py"
    spec = importlib.util.spec_from_file_location("iris_wheel_under_test", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _wheel_contents(path):
    import base64
    import hashlib
    import zipfile

    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        info = next(n for n in names if n.endswith(".dist-info/WHEEL"))
        wheel = z.read(info).decode()
        record = z.read(info.replace("WHEEL", "RECORD")).decode().splitlines()
        # Every file's RECORD line holds its sha256 and size (pip checks these when installing).
        for line in record:
            name, digest, size = line.rsplit(",", 2)
            if not digest:
                assert name.endswith("RECORD")
                continue
            data = z.read(name)
            assert digest == "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode(), name
            assert int(size) == len(data), name
        assert sorted(line.rsplit(",", 2)[0] for line in record) == sorted(names)
    return names, wheel


def test_the_backend_builds_a_pure_wheel_without_libiris_and_a_platform_one_with_it(tmp_path, monkeypatch):
    import shutil
    import sysconfig

    tree = tmp_path / "python"
    src = Path(__file__).resolve().parents[1]
    shutil.copytree(src / "iris_archive", tree / "iris_archive", ignore=shutil.ignore_patterns("__pycache__", "libiris.so*"))
    shutil.copytree(src / "_build", tree / "_build", ignore=shutil.ignore_patterns("__pycache__"))
    for f in ("pyproject.toml", "README.md"):
        shutil.copy(src / f, tree / f)
    backend = _backend()
    monkeypatch.setattr(backend, "HERE", tree)
    assert backend.get_requires_for_build_wheel() == []  # nothing to fetch: installs offline
    pure = backend.build_wheel(str(tmp_path))
    assert pure.endswith("-py3-none-any.whl"), pure
    names, wheel = _wheel_contents(tmp_path / pure)
    assert "Root-Is-Purelib: true" in wheel
    want = sorted(str(p.relative_to(tree)) for p in (tree / "iris_archive").rglob("*.py"))
    assert sorted(n for n in names if n.endswith(".py")) == want
    assert "iris_archive/py.typed" in names
    assert not any("libiris" in n for n in names)
    # The same tree gives the same bytes (fixed timestamps, sorted files).
    first = (tmp_path / pure).read_bytes()
    (tmp_path / pure).unlink()
    assert (tmp_path / backend.build_wheel(str(tmp_path))).read_bytes() == first
    # With libiris beside the package: a platform wheel that holds it.
    (tree / "iris_archive" / "libiris.so.1").write_bytes(b"\x7fELF not really")
    native = backend.build_wheel(str(tmp_path))
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    assert native.endswith(f"-py3-none-{platform}.whl"), native
    names, wheel = _wheel_contents(tmp_path / native)
    assert "Root-Is-Purelib: false" in wheel and "iris_archive/libiris.so.1" in names
