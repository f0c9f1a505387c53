"""The package's PEP 517 build backend: a wheel (and an sdist) from the standard library alone.

Why not setuptools: pip builds a package in an isolated environment and fetches the backend
named in pyproject.toml from the network into it, so `pip install ./python` failed offline in a
clean venv (and setuptools needs `wheel` for bdist_wheel on older pips). This backend needs
nothing (build-system.requires is empty), so the install works with no network.

What goes in: the `iris_archive` package (its .py files, py.typed, models/), and libiris
(`iris_archive/libiris.so*`) when one was placed beside the package before building (scripts/run.sh
python does; build it with -DIRIS_STATIC=ON so that it needs nothing but glibc). With libiris
the wheel is tagged for this platform (py3-none-linux_x86_64: a native library, no Python
ABI since it is loaded with ctypes); without it, py3-none-any."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import sysconfig
import tarfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent  # python/
PACKAGE = "iris_archive"


def _project() -> dict:
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        import tomli as tomllib  # type: ignore[no-redef]
    return tomllib.loads((HERE / "pyproject.toml").read_text())["project"]


def _files() -> list[Path]:
    """The package's files, sorted (the wheel's bytes do not depend on the file system's order)."""
    out = []
    for p in sorted((HERE / PACKAGE).rglob("*")):
        if not p.is_file() or "__pycache__" in p.parts:
            continue
        if p.suffix == ".py" or p.name == "py.typed" or p.name.startswith("libiris.so"):
            out.append(p)
    return out


def _tag(files: list[Path]) -> tuple[str, bool]:
    native = any(p.name.startswith("libiris.so") for p in files)
    if not native:
        return "py3-none-any", True
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"py3-none-{platform}", False


def _metadata(p: dict) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}", f"Summary: {p.get('description', '')}"]
    if "requires-python" in p:
        lines.append(f"Requires-Python: {p['requires-python']}")
    lic = p.get("license")
    if isinstance(lic, dict) and "text" in lic:
        lines.append(f"License: {lic['text']}")
    for d in p.get("dependencies", []):
        lines.append(f"Requires-Dist: {d}")
    for extra, deps in p.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {d}; extra == "{extra}"' for d in deps]
    readme = p.get("readme")
    body = ""
    if isinstance(readme, str) and (HERE / readme).is_file():
        lines.append("Description-Content-Type: text/markdown")
        body = "\n" + (HERE / readme).read_text()
    return "\n".join(lines) + "\n" + body


def _dist_info(p: dict) -> str:
    return f"{p['name'].replace('-', '_')}-{p['version']}.dist-info"


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _entry_points(p: dict) -> str:
    scripts = p.get("scripts", {})
    if not scripts:
        return ""
    return "[console_scripts]\n" + "".join(f"{k} = {v}\n" for k, v in scripts.items())


# PEP 517 hooks ------------------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    p = _project()
    d = Path(metadata_directory) / _dist_info(p)
    d.mkdir(parents=True, exist_ok=True)
    (d / "METADATA").write_text(_metadata(p))
    return d.name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    p = _project()
    files = _files()
    tag, purelib = _tag(files)
    name = f"{p['name'].replace('-', '_')}-{p['version']}-{tag}.whl"
    info = _dist_info(p)
    entries: list[tuple[str, bytes, int]] = []
    for f in files:
        mode = 0o755 if f.name.startswith("libiris.so") else 0o644
        entries.append((f.relative_to(HERE).as_posix(), f.read_bytes(), mode))
    wheel_text = f"Wheel-Version: 1.0\nGenerator: iris_wheel\nRoot-Is-Purelib: {'true' if purelib else 'false'}\nTag: {tag}\n"
    entries.append((f"{info}/METADATA", _metadata(p).encode(), 0o644))
    entries.append((f"{info}/WHEEL", wheel_text.encode(), 0o644))
    if _entry_points(p):
        entries.append((f"{info}/entry_points.txt", _entry_points(p).encode(), 0o644))
    lic = HERE.parent / "LICENSE"
    if lic.is_file():
        entries.append((f"{info}/LICENSE", lic.read_bytes(), 0o644))
    record = [_record_line(n, data) for n, data, _ in entries] + [f"{info}/RECORD,,"]
    entries.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode(), 0o644))
    out = Path(wheel_directory) / name
    # A fixed timestamp (SOURCE_DATE_EPOCH, else 1980): the same tree gives the same wheel bytes.
    stamp = time.gmtime(max(int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")), 315532800))[:6]
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for n, data, mode in entries:
            zi = zipfile.ZipInfo(n, date_time=stamp)
            zi.external_attr = (0o100000 | mode) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return name


def build_sdist(sdist_directory, config_settings=None):
    p = _project()
    base = f"{p['name'].replace('-', '_')}-{p['version']}"
    out = Path(sdist_directory) / f"{base}.tar.gz"
    with tarfile.open(out, "w:gz", format=tarfile.PAX_FORMAT) as t:
        for f in [HERE / "pyproject.toml", HERE / "README.md", Path(__file__)] + [f for f in _files() if not f.name.startswith("libiris.so")]:
            t.add(f, arcname=f"{base}/{f.relative_to(HERE).as_posix()}")
        pkg_info = _metadata(p).encode()
        ti = tarfile.TarInfo(f"{base}/PKG-INFO")
        ti.size = len(pkg_info)
        t.addfile(ti, io.BytesIO(pkg_info))
    return out.name
