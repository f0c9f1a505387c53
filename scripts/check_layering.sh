#!/usr/bin/env bash
# The library never depends on the tool: no file under the library's folders includes a header
# of converter/, verify/ or bench/, and only include/iris/ headers are public (installed).
# Run by ctest as `library_layering`.
set -euo pipefail
cd "$(dirname "$0")/.."
library=(include api formats quant kernels common)
bad=$(grep -rnE '#include "(converter|verify|bench|tests)/' "${library[@]}" || true)
if [ -n "$bad" ]; then
  echo "library files include tool files:"; echo "$bad"; exit 1
fi
# Library code prints nothing and names no command-line flag in its messages.
prints=$(grep -rnE '\b(printf|fprintf|puts|std::cout|std::cerr)\b' "${library[@]}" --include=*.cpp --include=*.cu --include=*.h --include=*.cuh | grep -v snprintf || true)
if [ -n "$prints" ]; then echo "library code prints:"; echo "$prints"; exit 1; fi
flags=$(grep -rnE '"[^"]*--[a-z][a-z-]+' "${library[@]}" --include=*.cpp --include=*.cu --include=*.h | grep -v '^\S*:\s*//' || true)
if [ -n "$flags" ]; then echo "library messages name command-line flags:"; echo "$flags"; exit 1; fi
echo "library_layering: $(find "${library[@]}" -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | wc -l) library files, none includes the tool, prints or names a flag"
