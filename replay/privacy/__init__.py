"""What keeps people's values out of a suite: typed, tenant-scoped pseudonyms (`redact.py`) over the
recognizers of what identifies a person or is a secret (`recognizers.py`). Used by every suite build
(replay.corpus) and by the suite's own privacy check (replay/suite.py)."""
