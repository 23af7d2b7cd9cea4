"""Telling: what the terminal, Markdown, HTML and the PR comment show of the records.

``fmt`` (numbers as text), ``messages`` (the failure message and the warnings of a
verdict), ``notices`` (a run's summary line and warnings, the same in every output),
``rows`` (the report model), ``text`` (the terminal table), ``markdown`` (job summary, annotations),
``html`` (``infperf report``; ``plotdata``: what its figures show), ``comment`` (the PR
comment). Reads typed records; never decides a verdict and never parses message text.
"""
