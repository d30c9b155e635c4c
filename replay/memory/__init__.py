"""The fast loop read by replay: memory files, their injection, the provenance ledger, lesson verdicts."""
