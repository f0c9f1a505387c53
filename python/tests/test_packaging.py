"""What `pip install ./python` puts in place: every module of the source tree (subpackages
included), py.typed (PEP 561: the annotations are for type checkers), and nothing less."""

import importlib.resources
import os
from pathlib import Path

import pytest

import iris

SOURCE = Path(__file__).resolve().parents[1] / "iris"


def test_py_typed_ships_with_the_package():
    assert importlib.resources.files("iris").joinpath("py.typed").is_file()


@pytest.mark.skipif(not os.environ.get("IRIS_EXPECT_INSTALLED"), reason="run from the source tree")
def test_the_installed_package_holds_every_source_module():
    installed = Path(iris.__file__).parent
    assert installed != SOURCE
    want = sorted(str(p.relative_to(SOURCE)) for p in SOURCE.rglob("*.py") if "__pycache__" not in p.parts)
    got = sorted(str(p.relative_to(installed)) for p in installed.rglob("*.py") if "__pycache__" not in p.parts)
    assert got == want
    assert (installed / "py.typed").is_file()
