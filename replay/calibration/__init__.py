"""Calibration instruments (DESIGN §10): the planted-effect endpoint and `worker-replay calibrate`.

- `planted.py`: the planted-effect endpoint: a seeded policy over a suite's answers, on loopback
- `episodes.py`: the planted policy for sandbox episodes
- `spec.py`: CAL.toml and the replay run it asks for
- `simulate.py`: a replicate's result rows without HTTP
- `calibrate.py`: `worker-replay calibrate`: end to end, then the bulk
- `planted_gates.py`: gate conditions against planted candidates
- `lesson.py`: the lesson gate against a planted harmful rule
- `sandbox.py`: the sandbox conditions against planted episodes
- `results.py`: `calibration.json`: each rate a count with its Wilson interval
- `report.py`: targets met or not, the table and the power-curve plot
"""
