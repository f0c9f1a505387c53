#!/usr/bin/env bash
# The Python package's CI step (ctest `python_tests`): `pip install ./python` into a fresh
# virtual environment (offline, with pip's build isolation: the package's own backend needs
# nothing; numpy, xxhash and zstandard from Debian), then pytest against the INSTALLED package, with the iris binary and libiris of
# this build. Exit 77 (skipped, saying why) when the interpreter lacks the packages that
# scripts/run.sh installs.
# Usage: run_tests.sh IRIS_BINARY LIBIRIS
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=${IRIS_PYTHON:-/usr/bin/python3}
if ! "$py" -c 'import numpy, xxhash, zstandard, pytest' 2>/dev/null; then
  echo "python_tests skipped: $py lacks numpy, xxhash, zstandard or pytest (Debian: python3-numpy python3-xxhash python3-zstandard python3-pytest)"
  exit 77
fi
work=$(mktemp -d /tmp/iris-python-XXXXXX)
trap 'rm -rf "$work"' EXIT
"$py" -m venv --system-site-packages --without-pip "$work/venv"
# From a copy: setuptools builds in the tree it is given, and the checkout stays as it was.
mkdir "$work/src" && cp -r "$here/pyproject.toml" "$here/README.md" "$here/iris_archive" "$here/_build" "$work/src/"
"$py" -m pip --python "$work/venv/bin/python" install --quiet --no-deps --no-index "$work/src" 2>&1 \
  | grep -v "^\s*$" || true
cd "$work"
IRIS_BINARY="$1" IRIS_LIBRARY="$2" IRIS_EXPECT_INSTALLED=1 "$work/venv/bin/python" -m pytest -q -p no:cacheprovider "$here/tests"
