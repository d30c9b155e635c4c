"""Where replay/calibration/calibrate.py still imports `wilson_interval` from, until that import names
`replay.stats` (the paired statistics moved there, below both the analysis and the lesson gate).
Delete this module with that import."""

from replay.stats import wilson_interval as wilson_interval
