"""Deferred-replay half of worker-tier: suites, scoring, paired statistics, gates and reports."""
