"""Checks on source text before anything runs: the candidate's allow-list gate and the reference's checks."""
