# Sourced by the GPU-machine scripts (gpu_run.sh, decode_run.sh, gemv_decode_shapes.sh), from
# the repository root: unpacks the carried static build B (default .device-bin; its binaries
# travel gzipped or xz-compressed, a third smaller, as a device run carries at most 64 MiB) and points the tests, the Python
# package and libiris's users at it and at this checkout's fixtures (tests/test_paths.h).
B=${B:-.device-bin}
for f in "$B"/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
for f in "$B"/*.xz; do
  [ -e "$f" ] || continue
  if command -v xz >/dev/null; then xz -d -f "$f"
  else python3 -c 'import lzma, os, sys; open(sys.argv[1][:-3], "wb").write(lzma.open(sys.argv[1]).read()); os.remove(sys.argv[1])' "$f"; fi
done
chmod +x "$B"/* 2>/dev/null
export LD_LIBRARY_PATH="$PWD/$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export IRIS_TEST_DATA_DIR="$PWD/tests/data" IRIS_BINARY="$PWD/$B/iris"
