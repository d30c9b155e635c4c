"""Sandboxed task replay (DESIGN §8): whole tasks replayed in deterministic worlds, the candidate driving
the tool loop to the end. Its commands are `replay/cli/sandbox.py`.

- `world.py`: the World framework (typed state, typed tools) and the episode's action log
- `scenario.py`: the scenario and trajectory formats
- `pack.py`: scenario packs: validate, load, freeze, stats, check
- `runner.py`: episodes: every arm × scenario of a pack
- `measures.py`: the four measures of an episode (pure)
- `claims.py`: does a final answer claim the work is done
- `gate_evidence.py`: paired tables and the gate evidence files
- `report_section.py`: `sandbox-report.html`, every episode step by step
"""
