"""Telling: what the terminal, Markdown, HTML and the PR comment show of the records.

``fmt`` (numbers as text), ``messages`` (the failure message and the warnings of a
verdict), ``text`` (the terminal table), ``markdown`` (job summary, annotations),
``html`` (``infperf report``; ``plotdata``: what its figures show), ``comment`` (the PR
comment). Reads typed records; never decides a verdict and never parses message text.
"""
