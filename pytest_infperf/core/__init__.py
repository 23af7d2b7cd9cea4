"""The core: typed records and the session's settings, imported by every other layer.

``results`` (benchmark results, verdicts, comparisons and the versioned JSON document),
``names`` (the str enums of metrics and comparison modes),
``options`` (every setting a user can give, one ``Spec`` type and one parser family: the
per-benchmark options and the session's settings), ``settings`` (the session's settings
read from a pytest config and frozen), ``record`` (what a result's ``extra`` holds), ``keys``
(where each per-session object lives on ``config.stash``),
``fsutil`` (crash-safe writes) and ``outcome`` (whether a results document's run
completed, and what fails it). Nothing here imports another layer of pytest_infperf, and
nothing here imports numpy: the plugin's start-up imports this layer.
"""
