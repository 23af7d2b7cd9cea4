"""The pytest session: one plugin object per job, registered by ``plugin.py``.

``context`` (what this run compares with and saves to, resolved once), ``modes`` (how
``infer_bench`` measures: disabled, plain, stored, A/B), ``gate`` (what a verdict means for
its test: fail, budget, accept), ``fixture`` (the ``infer_bench`` object), ``collector``,
``outcome`` (what the run came to, decided once: the ``Ending``), ``artifacts`` (the
files written from it), ``selection`` (warnings about the tests selected), ``terminal``,
``xdist``, ``coexist`` (a run another plugin would stop at
start-up), ``early`` (interleaving's workers started ahead of need). Everything
``pytest_configure`` imports is light (all of these but ``gate``, which comes with the
judge): numpy, git and the models come with the first measurement."""
