"""Interleaved A/B measurement: both code versions measured now, in one job.

``interleave`` (the ABBA blocks of each process pair, which ask the judge's plan when to
stop), ``workers`` (the worker processes and their pairs), ``controller`` (what starts and
reuses them: the base's worktree and environment), ``imports`` (which code each side
imports), ``proof`` (where it came from, checked), ``baseenv`` (the base's environment where
its dependency spec or compiled parts need one of its own),
``lifecycle`` (where a worker process stands: its stages and the allowed moves),
``checkout`` (the base commit's worktree and the tests a worker collects), ``procs`` (a
worker's process group and socket path), ``worker`` (the far side: a pytest
process that times blocks on demand, a leaf that imports only the measurement layer and
the core), ``protocol`` (the message names both sides share) and ``sigterm`` (SIGTERM
taken as Ctrl-C while a worktree or workers exist).
"""
