"""Interleaved A/B measurement: both code versions measured now, in one job.

``interleave`` (the worktree checkout, the worker processes and the ABBA blocks of each
process pair, which ask the judge's plan when to stop), ``worker`` (the far side: a pytest
process that times blocks on demand, a leaf that imports only the measurement layer and
the core) and ``protocol`` (the message names both sides share).
"""
