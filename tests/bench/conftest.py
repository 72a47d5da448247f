"""bench/ holds scripts, not a package: its modules import each other by their bare names
(``import procs``), so the tests of its shared modules put the folder on ``sys.path``."""

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))
