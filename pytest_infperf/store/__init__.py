"""The store: baselines on disk and in git, and what reads them.

``baselines`` (one results document per commit and environment, validated and written
atomically), ``compact`` (what an old baseline keeps), ``index`` (a derived index for
cheap reads), ``resolve`` (which stored baseline ``--perf-compare=REF`` means), ``git``
(git access with an error message for every situation), ``data_branch`` (baselines on a
dedicated branch), ``history`` (a benchmark along first-parent history) and ``exports``
(other tools' formats). Imports the layers below it; never judges.
"""
