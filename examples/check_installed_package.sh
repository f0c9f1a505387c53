#!/usr/bin/env bash
# The installed package as an engine sees it (run by ctest as `installed_package`):
#   1. cmake --install the build into a fresh prefix;
#   2. configure examples/ as a separate project with find_package(iris), build, and build the
#      C example once more with pkg-config alone;
#   3. run both examples on an archive of the bundled gpt-oss snapshot and check the output:
#      the tensor list against `iris inspect --json`, the dequantized values byte for byte
#      against `iris export --dtype f32`, the CUDA example's GEMV check (exit 77 = no GPU).
# Usage: check_installed_package.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd); src=$(cd "$2" && pwd)
work=$(mktemp -d /tmp/iris-package-XXXXXX)
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"

cmake --install "$build" --prefix "$prefix" >/dev/null
test -x "$prefix/bin/iris"
ls "$prefix"/lib*/libiris.so.1 >/dev/null
test -f "$prefix/include/iris/iris.h"
test -f "$prefix/share/doc/iris/LICENSE" && test -f "$prefix/share/doc/iris/CHANGELOG.md"
grep -q "^.TH IRIS 1" "$prefix/share/man/man1/iris.1" && grep -q "^complete .* iris$" "$prefix/share/bash-completion/completions/iris"

# A CPU-only consumer on a machine without the CUDA toolkit (find_package(CUDAToolkit) disabled):
# find_package(iris) and iris::iris work whether or not iris was built with CUDA; asking for the
# cuda component fails there with a message that says why, and OPTIONAL_COMPONENTS cuda does not.
mkdir -p "$work/cpu_consumer"
cat > "$work/cpu_consumer/main.c" <<'C'
#include <stdio.h>
#include <iris/iris.h>
int main(void) { printf("%s\n", iris_version_string()); return iris_abi_version() == IRIS_ABI_VERSION ? 0 : 1; }
C
consumer() {  # consumer NAME FIND_PACKAGE_ARGS
  mkdir -p "$work/cpu_consumer/$1"
  printf 'cmake_minimum_required(VERSION 3.25)\nproject(c LANGUAGES C)\nfind_package(iris %s)\nmessage(STATUS "iris_cuda_FOUND=${iris_cuda_FOUND}")\nadd_executable(c ../main.c)\ntarget_link_libraries(c PRIVATE iris::iris)\n' "$2" \
    > "$work/cpu_consumer/$1/CMakeLists.txt"
  cmake -S "$work/cpu_consumer/$1" -B "$work/cpu_consumer/$1/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=TRUE > "$work/cpu_consumer/$1.log" 2>&1
}
consumer plain "REQUIRED" || { cat "$work/cpu_consumer/plain.log" >&2; echo "FAIL: find_package(iris) without the CUDA toolkit" >&2; exit 1; }
cmake --build "$work/cpu_consumer/plain/build" > "$work/cpu_consumer/plain-build.log" 2>&1 || { cat "$work/cpu_consumer/plain-build.log" >&2; exit 1; }
[ "$("$work/cpu_consumer/plain/build/c")" = "$("$prefix/bin/iris" --version | cut -d' ' -f1)" ] || { echo "FAIL: the CPU consumer's iris_version_string()" >&2; exit 1; }
consumer optional "REQUIRED OPTIONAL_COMPONENTS cuda" || { cat "$work/cpu_consumer/optional.log" >&2; echo "FAIL: OPTIONAL_COMPONENTS cuda without the toolkit" >&2; exit 1; }
grep -q "iris_cuda_FOUND=FALSE" "$work/cpu_consumer/optional.log" || { echo "FAIL: iris_cuda_FOUND not FALSE without the toolkit" >&2; exit 1; }
if consumer required "REQUIRED COMPONENTS cuda"; then echo "FAIL: COMPONENTS cuda configured without the toolkit" >&2; exit 1; fi
grep -q "iris component cuda: " "$work/cpu_consumer/required.log" || { cat "$work/cpu_consumer/required.log" >&2; echo "FAIL: no reason given for the missing cuda component" >&2; exit 1; }
echo "find_package(iris) without the CUDA toolkit: OK (iris::iris builds and runs; the cuda component is refused, saying why)"

cmake -S "$src/examples" -B "$work/examples" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/examples" >/dev/null
libdir=$(dirname "$(ls "$prefix"/lib*/libiris.so.1)")
PKG_CONFIG_PATH="$libdir/pkgconfig" cc "$src/examples/inspect_dequant.c" -o "$work/inspect_pc" \
  $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs iris) -Wl,-rpath,"$libdir"

iris="$prefix/bin/iris"
archive="$work/gptoss.iris"
"$iris" convert "$src/tests/data/fixtures/gptoss-mxfp4" -o "$archive" -q
tensor=model.layers.1.mlp.experts.down_proj
for example in "$work/examples/inspect_dequant" "$work/inspect_pc"; do
  "$example" "$archive" "$tensor" "$work/values.f32" > "$work/out.txt"
  want=$("$iris" inspect "$archive" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["tensors"]))')
  got=$(grep -c '^tensor ' "$work/out.txt")
  [ "$got" = "$want" ] || { echo "FAIL: $example listed $got tensors, iris inspect $want" >&2; exit 1; }
  grep -q "^dequantized $tensor (mxfp4)" "$work/out.txt" || { echo "FAIL: no dequantized line" >&2; cat "$work/out.txt" >&2; exit 1; }
  "$iris" export "$archive" -o "$work/export.safetensors" --dtype f32 --force -q
  python3 - "$work/export.safetensors" "$tensor" "$work/values.f32" <<'PY'
import json, struct, sys
path, name, values = sys.argv[1:]
with open(path, "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
    begin, end = header[name]["data_offsets"]
    f.seek(8 + n + begin)
    want = f.read(end - begin)
got = open(values, "rb").read()
if got != want:
    sys.exit(f"FAIL: {name}: the example's {len(got)} bytes differ from iris export's {len(want)}")
PY
done
echo "inspect_dequant: OK ($want tensors, $tensor equal to iris export --dtype f32, find_package and pkg-config builds)"

if [ -x "$work/examples/cuda_gemv" ]; then
  set +e
  "$work/examples/cuda_gemv" "$archive" "$tensor"
  rc=$?
  set -e
  if [ $rc = 77 ]; then echo "cuda_gemv: built; not run (no GPU here)"; elif [ $rc != 0 ]; then echo "FAIL: cuda_gemv exit $rc" >&2; exit 1; fi
fi
