"""Ops tests drive the real gateway through the serve tests' harness."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "serve"))  # gateway_harness
