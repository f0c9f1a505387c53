# Sourced by the GPU check scripts (nvfp4_gpu_session.sh, tool_twins_gpu_session.sh): verify NAME
# ARCHIVE runs `iris verify --device cuda` ($I) on an archive, its JSON and errors under $OUT,
# one line ok/FAIL on stdout; a failure sets rc=1. convert_and_verify SNAPSHOT converts a
# checkpoint folder as stored into $OUT/archives/NAME.iris (NAME its folder's) and verifies it.
verify() {
  if "$I" verify "$2" --device cuda --json > "$OUT/$1.verify.json" 2> "$OUT/$1.verify.err"; then
    echo "ok   $1: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d.get("device"), sum(len(t.get("checks", [])) for t in d.get("tensors", [])), "checks")' "$OUT/$1.verify.json")"
  else
    rc=1
    echo "FAIL $1: $(tail -c 600 "$OUT/$1.verify.err") $(grep -o '"detail": "[^"]*"' "$OUT/$1.verify.json" | grep -v '""' | head -3)"
  fi
}
convert_and_verify() {
  local name
  name=$(basename "$1")
  mkdir -p "$OUT/archives"
  "$I" convert "$1" -o "$OUT/archives/$name.iris" -q --force || { rc=1; echo "FAIL $name: convert"; return; }
  verify "$name" "$OUT/archives/$name.iris"
}
