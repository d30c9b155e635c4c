"""`worker-replay calibrate`: the gates' false-pass rate and power against the planted-effect endpoint."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from replay.suite import load_suite


def _calibrate(args: argparse.Namespace) -> int:
    from replay.calibration.calibrate import calibrate
    from replay.calibration.report import format_calibration
    from replay.calibration.spec import load_spec

    spec = load_spec(args.spec)
    if args.memory is not None:
        spec = spec.model_copy(update={"memory": args.memory})
    if args.noise_from is not None:
        from replay.calibration.spec import with_pilot_noise
        from replay.run.directory import load_results

        spec, taken = with_pilot_noise(spec, load_results(args.noise_from))
        print(taken, file=sys.stderr)
    pack = None
    if args.pack is not None:
        from replay.sandbox.pack import load_pack

        pack = load_pack(args.pack)
    cal = calibrate(load_suite(args.suite), spec, args.out, replicates=args.replicates, pack=pack)
    print(format_calibration(cal), end="")
    print(f"calibration written: {args.out}", file=sys.stderr)
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("calibrate", help="false-pass rate and power of the gates, the lesson gate and the sandbox "
                                         "measures, measured against the planted-effect endpoint (DESIGN §10)")
    p.add_argument("--suite", type=Path, required=True, metavar="DIR", help="the frozen suite the planted endpoint "
                   "answers (it knows each decision's recorded call)")
    p.add_argument("--pack", type=Path, metavar="DIR",
                   help="a scenario pack: calibrate the gate's sandbox conditions on it (the spec's [pack])")
    p.add_argument("--spec", type=Path, required=True, metavar="CAL.toml",
                   help="the planted policy and what to calibrate")
    p.add_argument("--out", type=Path, required=True, metavar="DIR",
                   help="where calibration.json, calibration.txt and power.svg are written")
    p.add_argument("--memory", type=Path, metavar="DIR", help="workspace memory root (overrides the spec's)")
    p.add_argument("--replicates", type=int, metavar="N", help="Monte-Carlo replicates (overrides the spec's)")
    p.add_argument("--noise-from", type=Path, metavar="RUN_DIR",
                   help="plant the noise floor an A/A pilot measured (a run with a replicate arm; overrides the "
                        "spec's noise): every rate is then shown with it beside the exact one")
    p.set_defaults(func=_calibrate)
