"""Finding libiris: $IRIS_LIBRARY, next to the package, the system path; and a clear answer
when there is none (dequantize falls back to numpy, or says why with backend="native")."""

import os
import subprocess
import sys
import textwrap

import pytest

from iris_archive import _native


def run_python(code, **env):
    e = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=e)


def test_missing_library_is_named_and_numpy_takes_over(converted):
    code = f"""
        import iris_archive as iris
        print(iris.native_library())
        t = iris.open({str(converted("llama-nf4-dq"))!r}).tensors["model.layers.0.mlp.up_proj.weight"]
        print(t.dequantize("float32").shape)
        try:
            t.dequantize("float32", backend="native")
        except iris.IrisError as e:
            print("refused:", e)
    """
    r = run_python(code, IRIS_LIBRARY="/nonexistent/libiris.so.1")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("none (") and "/nonexistent/libiris.so.1" in lines[0]
    assert lines[1] == "(1024, 256)" or lines[1].startswith("(")
    assert lines[2].startswith("refused: libiris not found") and "/nonexistent/libiris.so.1" in lines[2]


@pytest.mark.skipif(_native.library() is None, reason=f"libiris not found: {_native.why_not()}")
def test_library_next_to_the_package_is_found(tmp_path):
    import shutil

    import iris_archive as iris

    pkg = tmp_path / "iris_archive"
    shutil.copytree(os.path.dirname(iris.__file__), pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(_native.why_not(), pkg / "libiris.so.1")
    env = {k: v for k, v in os.environ.items() if k != "IRIS_LIBRARY"}
    r = subprocess.run([sys.executable, "-c", "import iris_archive; print(iris_archive.native_library())"], capture_output=True, text=True,
                       env=dict(env, PYTHONPATH=str(tmp_path)), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(pkg / "libiris.so.1")


@pytest.mark.skipif(not os.environ.get("IRIS_EXPECT_INSTALLED"), reason="run from the source tree")
def test_the_installed_package_is_under_test():
    import iris_archive as iris

    assert "site-packages" in iris.__file__, iris.__file__


@pytest.mark.skipif(_native.library() is None, reason=f"libiris not found: {_native.why_not()}")
def test_without_xxhash_and_zstandard_libiris_does_their_work(converted):
    """Machines without the two packages (a GPU box's Python, say) still open, verify and read."""
    code = f"""
        import sys
        sys.modules["xxhash"] = None      # import fails, as where it is not installed
        sys.modules["zstandard"] = None
        import iris_archive as iris
        a = iris.open({str(converted("llama-nf4-dq"))!r})
        a.verify()
        print(len(a.files["config.json"]))
    """
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    from conftest import FIXTURES

    assert int(r.stdout) == len((FIXTURES / "llama-nf4-dq" / "config.json").read_bytes())
