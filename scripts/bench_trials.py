"""Calibration of the trials' sequential test by simulation: the A/A false-abort rate
under repeated looks, against a naive repeated z-test, and the detection delay (bad events
needed) for 2× and 1.5× error-rate regressions. Prints a Markdown table.

    python scripts/bench_trials.py [--trials 10000] [--looks 200] [--exposure 100] [--rate 0.02] [--seed 16]
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from serve.trials.simulation import simulate


def wilson_upper(k: int, n: int, z: float = 1.96) -> float:
    p = k / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre + spread) / (1 + z * z / n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--looks", type=int, default=200)
    parser.add_argument("--exposure", type=float, default=100.0, help="requests per cohort per look (Poisson mean)")
    parser.add_argument("--rate", type=float, default=0.02, help="control's bad-event rate per request")
    parser.add_argument("--seed", type=int, default=16)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"{args.trials} simulated trials × {args.looks} looks, Poisson({args.exposure:g}) requests per cohort "
          f"per look, control rate {args.rate:g}, seed {args.seed}\n")
    print("| α | e-process A/A aborts (95% upper) | naive z-test A/A aborts |")
    print("|---|---|---|")
    for alpha in (0.05, 0.01, 0.0025):
        sim = simulate(rng, args.trials, args.looks, args.exposure, args.rate, alpha=alpha)
        aborted = int(sim.aborted.sum())
        print(f"| {alpha:g} | {sim.abort_rate:.4f} ({wilson_upper(aborted, sim.trials):.4f}) | "
              f"{sim.naive_abort_rate:.4f} |")
    print("\n| regression | α | detected within the looks | bad events to abort: median | 90th percentile |")
    print("|---|---|---|---|---|")
    for ratio in (2.0, 1.5):
        for alpha in (0.01, 0.0025):
            sim = simulate(rng, args.trials, args.looks, args.exposure, args.rate, ratio=ratio, alpha=alpha)
            print(f"| {ratio:g}× | {alpha:g} | {sim.abort_rate:.4f} | {sim.delay(0.5):.0f} | {sim.delay(0.9):.0f} |")


if __name__ == "__main__":
    main()
