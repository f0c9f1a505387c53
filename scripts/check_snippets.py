#!/usr/bin/env python3
"""Every code block of the README and the docs, run (ctest `doc_snippets`).

    check_snippets.py --iris BIN --libiris LIB --source ROOT

On the demo's archive (tests/data/fixtures/gptoss-mxfp4 converted, as `model.iris` in a scratch
folder that is the working directory of every snippet):
- ```c: compiled inside `int main(void)` with the C headers a program needs (unless it has its
  own main), -Wall -Werror, linked against LIB, run: exit 0 expected;
- ```python: run with the package of ROOT/python and LIB; a block that needs torch (imports torch or
  transformers, or uses iris.torch or iris.models) is compiled (syntax) only, which the summary
  says: those blocks use a model or inputs they do not build (the GPU tests of python/tests run
  the same calls);
- ```toml: `iris convert` of the llama fixture with it as --options-file, --dry-run;
- ```cmake, ```sh and unlabelled blocks are not run here (the CMake package is ctest
  installed_package's; shell lines are the README's own commands).
Exit 0 when every block that ran passed."""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FILES = ["README.md", "python/README.md", "docs/*.md"]
NEEDS_TORCH = re.compile(r"^\s*(import|from)\s+(torch|transformers)\b|\biris(_archive)?\.(torch|models)\b", re.M)
C_PRELUDE = "#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <iris/iris.h>\n"


def blocks(path: Path):
    """(language, first line number, code) of each fenced block."""
    lang, start, code = None, 0, []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        m = re.match(r"^\s*```(\w*)\s*$", line)
        if m and lang is None:
            lang, start, code = m.group(1), n + 1, []
        elif m and lang is not None and not m.group(1):
            yield lang, start, "\n".join(code) + "\n"
            lang = None
        elif lang is not None:
            code.append(line)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iris", required=True)
    ap.add_argument("--libiris", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    try:
        import numpy  # noqa: F401 - the package's one dependency
    except ImportError:
        print(f"doc_snippets skipped: {sys.executable} lacks numpy (Debian: python3-numpy)")
        return 77
    root = Path(a.source).resolve()
    iris, lib = str(Path(a.iris).resolve()), Path(a.libiris).resolve()
    work = Path(tempfile.mkdtemp(prefix="iris-snippets-"))
    try:
        subprocess.run([iris, "convert", str(root / "tests/data/fixtures/gptoss-mxfp4"), "-o", str(work / "model.iris"), "-q"], check=True)
        (work / "snapshot").symlink_to(root / "tests/data/fixtures/gptoss-mxfp4")
        env = dict(os.environ, PYTHONPATH=str(root / "python"), IRIS_LIBRARY=str(lib), IRIS_BINARY=iris)
        ran = syntax_only = failed = 0
        for pattern in FILES:
            for md in sorted(root.glob(pattern)):
                for lang, line, code in blocks(md):
                    where = f"{md.relative_to(root)}:{line}"
                    ok, note = True, ""
                    if lang == "c":
                        src = work / "snippet.c"
                        src.write_text(code if re.search(r"\bint\s+main\s*\(", code) else C_PRELUDE + "int main(void) {\n" + code + "return 0;\n}\n")
                        build = subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", str(root / "include"), str(src),
                                                "-o", str(work / "snippet"), f"-L{lib.parent}", f"-l:{lib.name}", f"-Wl,-rpath,{lib.parent}"],
                                               capture_output=True, text=True)
                        r = build if build.returncode else subprocess.run([str(work / "snippet")], cwd=work, capture_output=True, text=True)
                        ok, note = r.returncode == 0, (r.stdout + r.stderr).strip()
                    elif lang == "python":
                        if NEEDS_TORCH.search(code):
                            compile(code, where, "exec")
                            print(f"syntax only: {where} (python; needs torch, a GPU and a model the block does not build)")
                            syntax_only += 1
                            continue
                        r = subprocess.run([sys.executable, "-c", code], cwd=work, env=env, capture_output=True, text=True)
                        ok, note = r.returncode == 0, (r.stdout + r.stderr).strip()
                    elif lang == "toml":
                        (work / "options.toml").write_text(code)
                        r = subprocess.run([iris, "convert", str(root / "tests/data/fixtures/llama-bf16"), "-o", str(work / "t.iris"),
                                            "--options-file", str(work / "options.toml"), "--dry-run", "--allow-unmatched"],
                                           cwd=work, capture_output=True, text=True)
                        ok, note = r.returncode == 0, (r.stdout + r.stderr).strip()
                    else:
                        continue
                    ran += 1
                    if ok:
                        print(f"OK {where} ({lang})")
                    else:
                        failed += 1
                        print(f"FAIL {where} ({lang}):\n{note}\n--- the block ---\n{code}", file=sys.stderr)
        print(f"{ran + syntax_only} code blocks: {ran} run, {syntax_only} compiled only (torch), {failed} failed")
        return 1 if failed else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
