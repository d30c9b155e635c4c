"""Progressive adapter trials: a canary that steps itself, analysed with always-valid sequential
tests, aborting on its own and promoting only through the production-candidate gate.
"""
