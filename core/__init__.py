"""What both halves speak: file formats, tool-call parsing, key sets, call scoring, the guard's
verdicts, the capture store and the gate's evidence formats, plus TOML/SQLite/process plumbing.

It imports neither `serve` nor `replay`; both import it.

- `records.py`: the suite and result formats (`Decision`, `ResultRecord`) and the `Strict` base of every format
- `toolcalls.py`: the one tool-call parser (structured calls, Hermes and Qwen3-Coder text)
- `toolvalues.py`: text parameter values typed by the offered schema, as vLLM types them
- `keyset.py`: key sets and canonical values of tool-call arguments
- `scoring.py`: key-set correctness of one answer, and agreement of two calls (pure)
- `guard.py`: the tool-outcome guard: a tool result's anomaly kind (pure)
- `wire.py`: the neutral reading of chat, Anthropic Messages and Responses requests and answers
- `wireshapes.py`: the wire shapes `wire.py` reads (untrusted, every value checked) and builds, as TypedDicts
- `canonical.py`: the canonical form of a request and the hashes a descriptor is proven by
- `capture_store.py`: the capture store the gateway writes and replay reads
- `curated.py`: a curated training set's formats (`train.jsonl`, `manifest.json`) and the adapter's training record
- `chatrow.py`: a decision as the chat row trainers read (curation writes it; the contamination check reads it)
- `near_duplicates.py`: the near-duplicate rule (word 8-grams of a decision state): curation's eval boundary and
  the gate's contamination check apply the same one
- `evidence.py`: the gate evidence file formats (the reviewer agreement report included)
- `attestation.py`: a gate verdict as an in-toto Statement over the digests of what it judged; file digests
- `lineage.py`: a model directory's digest, quantisation scheme and what it was built from (merge, quantize)
- `errors.py`: `WorkerTierError`, the one exception root
- `names.py`: the one name type (workspace, session, route, adapter, model, trial and request ids)
- `atomicwrite.py`: files written whole or not at all (a temporary file renamed over the path)
- `hosts.py`: which hosts are loopback (the gateway's keyless bind, replay's sandbox rule)
- `console.py`: what the three CLIs share: dispatch, the one `error: …` line, arm ordering
- `regularfile.py`: the one way a file is opened for reading (a regular file only, never waited on)
- `jsonfile.py`: the one bounded JSON/JSONL reader, with typed `file:line` errors
- `patterns.py`: regular expressions from files, matched by RE2 in linear time
- `tomlfile.py`: a TOML file read into a pydantic model, errors naming file, line and key
- `sqlitedb.py`: the SQLite conventions of the stores (WAL) and the one read-only opener
- `process.py`: child services started, health-checked and stopped as a group; SIGTERM unwinds as Ctrl-C
"""
