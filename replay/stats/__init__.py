"""The statistics, pure: no I/O, no globals. Exact tests and intervals for comparing two arms on the same
decisions, for one proportion, for two raters, and the power of the gates' test (DESIGN §4, §10, §13).

This package re-exports the public API.

- `paired.py`: the exact sign test, Wilson and Newcombe intervals, paired and repeat comparisons, overhead
- `binomial.py`: the Clopper–Pearson interval of one proportion (a reviewer's false-pass rate)
- `kappa.py`: Cohen's κ of two raters with its interval
- `power.py`: power of the paired test, the decisions a suite needs, the minimum detectable effect
"""

from replay.stats.binomial import (
    clopper_pearson,
)
from replay.stats.kappa import (
    Kappa,
    cohen_kappa,
)
from replay.stats.paired import (
    DEFAULT_CONFIDENCE,
    Overhead,
    PairedComparison,
    RepeatComparison,
    newcombe_paired_ci,
    overhead,
    paired_comparison,
    rejects,
    repeat_comparison,
    share_difference,
    sign_test,
    sign_test_p,
    wilson_interval,
    z_value,
)
from replay.stats.power import (
    MDE_TOLERANCE_POINTS,
    Needed,
    check_levels,
    critical_losses,
    decisions_needed,
    effect_points,
    gate_power,
    minimum_detectable_effect,
    noisy_discordance,
    power_at,
    power_curve,
    signal_discordance,
    win_share,
)

__all__ = [
    "DEFAULT_CONFIDENCE",
    "Kappa",
    "MDE_TOLERANCE_POINTS",
    "Needed",
    "Overhead",
    "PairedComparison",
    "RepeatComparison",
    "check_levels",
    "clopper_pearson",
    "cohen_kappa",
    "critical_losses",
    "decisions_needed",
    "effect_points",
    "gate_power",
    "minimum_detectable_effect",
    "newcombe_paired_ci",
    "noisy_discordance",
    "overhead",
    "paired_comparison",
    "power_at",
    "power_curve",
    "rejects",
    "repeat_comparison",
    "share_difference",
    "sign_test",
    "sign_test_p",
    "signal_discordance",
    "wilson_interval",
    "win_share",
    "z_value",
]
