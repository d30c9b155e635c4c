"""Calibration instruments (DESIGN §10): the planted-effect endpoint and `worker-replay calibrate`."""
