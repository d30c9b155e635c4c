"""The corpus side of replay: the platform's records of its sessions, read off the serving host.

Transcript sources (`transcripts.py`: the protocol and this project's own format; `claude_code.py`: the
session files the runtime's Claude Code writes; `sources.py`: which one reads a directory), resolution of
content-free descriptors against them (`resolve.py`), and suites built from captures (`capture_suite.py`)
and from a corpus alone (`corpus_suite.py`), with the corpus's counts (`audit.py`). Redaction, which every
suite build applies, is `replay.privacy`.
"""
