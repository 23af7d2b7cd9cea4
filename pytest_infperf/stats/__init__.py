"""Statistics: pure functions of numbers, numpy only.

``descriptive`` (medians, intervals, outliers of latency samples), ``ranks`` (the rank
tests and intervals behind a stored comparison, returning a typed ``Estimate``),
``pooled`` (interleaved quads replicated across process pairs, random effects) and
``changepoint`` (where a shift entered a history). They know nothing of pytest, git or
the store; they import only the core.
"""
