"""The judge: every verdict of every mode is made here, and nowhere else.

``judge`` (the ``Judge``: a stored comparison, a re-measure, an interleaved verdict from
the plan's last look; the one module, with ``merged``, that writes a verdict:
tests/test_architecture.py), ``observation`` (one side's measurement as the judge reads
it), ``plan`` (the interleaved protocol: quads, process pairs, every
alpha split and stopping rule), ``device`` (a GPU benchmark's device time judged apart from
its host's, throttled and shared GPUs), ``work`` (the work diff of two profiled passes),
``accept`` (``Perf-Accept:`` trailers), ``rules`` (the session's rules the judge applies
on top of the statistics), ``policy`` (what happens to a compared benchmark:
its stored pass stands, or it is interleaved, settled, re-checked, re-measured or left for
the budget) and ``merged`` (a split run's verdicts held to the
whole run's family, by the judge's and the plan's rules). It returns
typed records; what a verdict means for a test (fail, warn, accept) is the session's gate,
and the words a reviewer reads are the report's.
"""
