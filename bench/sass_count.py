#!/usr/bin/env python3
"""Static instruction counts of the kernels in a cubin, by opcode (cuobjdump -sass).

Used to check a decode change's instruction count before (or beside) timing it:

  python3 bench/sass_count.py old.cubin new.cubin --match 'experts_mma_kernel.*MmaMxfp4ELb0ELi0E'

prints, per matching function of each cubin, the total instruction count, how many are
predicated (@P / @!P: issued even when the predicate is false), and the opcodes whose counts
differ between the cubins. Needs cuobjdump (the CUDA toolkit's; the GPU machines have it).
"""
import argparse
import collections
import re
import subprocess
import sys

FUNC = re.compile(r"^\s*Function : (\S+)")
INSN = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)")


def functions(cubin):
    """{function name: Counter of opcode (base name) -> count, plus '<predicated>'}."""
    sass = subprocess.run(["cuobjdump", "-sass", cubin], check=True, capture_output=True, text=True).stdout
    out, current = {}, None
    for line in sass.splitlines():
        m = FUNC.match(line)
        if m:
            current = out.setdefault(m.group(1), collections.Counter())
            continue
        m = INSN.match(line)
        if m and current is not None:
            current[m.group(2).split(".")[0]] += 1
            if m.group(1):
                current["<predicated>"] += 1
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cubins", nargs="+")
    ap.add_argument("--match", required=True, help="regular expression on the mangled function name")
    args = ap.parse_args()
    pattern = re.compile(args.match)
    per_cubin = []
    for cubin in args.cubins:
        found = {name: c for name, c in functions(cubin).items() if pattern.search(name)}
        if not found:
            print(f"{cubin}: no function matches {args.match}", file=sys.stderr)
            return 1
        per_cubin.append(found)
        for name, c in sorted(found.items()):
            total = sum(v for k, v in c.items() if not k.startswith("<"))
            print(f"{cubin}: {name}: {total} instructions, {c['<predicated>']} predicated")
    if len(per_cubin) > 1:
        for name in sorted(per_cubin[0]):
            if not all(name in f for f in per_cubin[1:]):
                continue
            counts = [f[name] for f in per_cubin]
            ops = sorted(set().union(*counts))
            diff = [(op, [c[op] for c in counts]) for op in ops if len({c[op] for c in counts}) > 1]
            print(f"{name}: opcodes that differ: " + ", ".join(f"{op} {'/'.join(map(str, v))}" for op, v in diff))
    return 0


if __name__ == "__main__":
    sys.exit(main())
