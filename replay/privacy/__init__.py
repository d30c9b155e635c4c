"""What keeps people's values out of a suite: typed, tenant-scoped pseudonyms over the recognizers of what
identifies a person or is a secret. Used by every suite build (replay.corpus) and by the suite's own privacy
check (replay/suite.py).

- `redact.py`: typed, tenant-scoped pseudonyms, and the privacy check (pure)
- `recognizers.py`: what redaction detects, on `phonenumbers`, `python-stdnum`, `detect-secrets`
"""
