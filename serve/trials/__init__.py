"""Progressive adapter trials: a canary that steps itself, analysed with always-valid sequential
tests, aborting on its own and promoting only through the production-candidate gate.

- `sequential.py`: the always-valid sequential test of a candidate's bad events
- `simulation.py`: the test's simulated calibration: A/A false aborts, detection delays
- `trial_policy.py`: the trial policy (`configs/trials/`)
- `machine.py`: the trial's state machine (pure)
- `store.py`: trials in SQLite (state and journal), beside the registry
- `signals.py`: cohort counts from the gateway's stores
- `controller.py`: drives trials: events in, transitions persisted, actions on the registry
- `supervisor.py`: the trials inside the gateway: recovery, a look each interval, the Prometheus series
- `admin_routes.py`: the trials' admin API under `/admin/trials`
"""
