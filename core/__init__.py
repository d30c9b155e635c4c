"""What both halves speak: file formats, tool-call parsing, key sets, call scoring, the guard's
verdicts, the capture store and the gate's evidence formats, plus TOML/SQLite/process plumbing.

It imports neither `serve` nor `replay`; both import it.
"""
