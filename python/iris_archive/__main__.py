"""`python -m iris_archive PATH [--json] [--verify]`: the archive's tensors and embedded files (iris._cli)."""

import sys

from ._cli import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m iris_archive"))
