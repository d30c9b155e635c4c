"""What keeps people's values and tenants' names out of what leaves: typed, tenant-scoped pseudonyms over the
recognizers of what identifies a person or is a secret, and over what the platform knows names a tenant. Used by
every suite build (replay.corpus), curation (replay.curation) and the suite's own privacy check (replay/suite.py).

- `redact.py`: typed, tenant-scoped pseudonyms, and the privacy check (pure)
- `recognizers.py`: what redaction detects by shape, on `phonenumbers`, `python-stdnum`, `detect-secrets`; person
  names after a cue in prose or under a key that names a person (pure)
- `tenants.py`: what redaction finds by value: registered workspace names, the runtime's paths (pure)
- `release_audit.py`: the privacy audit of a curated set or a suite directory (reads files)
"""
