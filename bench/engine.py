"""Engine benchmark (GPU): `python -m bench.engine --help`, same as `ribbon bench engine`."""

import sys

from worker.bench.engine import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
