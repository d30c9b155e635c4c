"""Lets the replay tests import their fixture builders (`from e13 import ...`)."""

import sys
from pathlib import Path

HERE = str(Path(__file__).parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
