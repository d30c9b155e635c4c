"""The corpus side of replay: the platform's records of its sessions, read off the serving host.

Redaction, which every suite build applies, is `replay.privacy`.

- `transcripts.py`: the `TranscriptSource` protocol and this project's own session format
- `claude_code.py`: the session files the runtime's Claude Code writes, as a transcript source
- `sources.py`: which source reads a corpus directory
- `resolve.py`: content-free descriptors proven by hash against a source
- `capture_suite.py`: suites from the capture store
- `corpus_suite.py`: suites from a corpus alone, task-disjoint splits
- `context_window.py`: prompts the target engine cannot hold, left out when a suite is built
- `audit.py`: `worker-replay corpus audit`: what a corpus holds
- `retrieval.py`: `corpus reads`: memory reads per turn, the index's coverage
"""
