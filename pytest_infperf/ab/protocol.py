"""The A/B worker protocol: message names and shapes shared by the controller
(:mod:`.interleave`) and the worker (:mod:`.worker`). A leaf: it imports nothing of the
package. The worker builds its ``ready`` and ``done`` messages as :class:`Ready` and
:class:`Done`, so mypy checks their shape where they are made.

Messages are dicts over a ``multiprocessing.connection``. The controller sends ``op``s, the
worker answers with ``ev``s:

- ``run`` a test -> ``ready`` at each ``infer_bench`` call (warmed up, waiting), then
  ``done`` with the test's outcome;
- inside a ready call: ``block`` (``n`` samples of ``calls`` calls, timed on CPU ``cpu``
  when it is not None) -> ``samples`` (``values``, seconds per call, and
  ``metrics``, what the sampler recorded per sample besides: a generation's TTFT, TPOT...);
  ``finish`` -> ``result`` (with ``children``, below); ``skip`` (return unmeasured: the
  controller wants a later call of the same test); ``end`` (let the test finish, measuring
  nothing more); ``profile`` (the profiled pass of the warm call, in ``mode``: counts or
  full) -> ``profiled``
  (``work``: the :class:`~pytest_infperf.core.results.WorkProfile` as JSON, or None), asked
  only of a worker whose ``collected`` listed ``"profile"`` in its ``features`` (a base
  checkout's older worker does not know it); every ``ready`` carries ``origins``, where
  the project's modules in the worker came from (absent from an older worker's), and
  ``children``, those of the processes its tests started (each a dict like ``origins``);
- ``collected`` lists the perf tests' ``nodeids`` and the collection's ``errors`` (node id
  and the error's tail: a file of the checkout that could not be collected);
- ``quit`` ends the worker; ``error`` reports a crash of the worker itself.
"""

from __future__ import annotations

from typing import Any, TypedDict

#: Target duration of one block of samples on each side.
BLOCK_TIME_S = 0.05
#: Target duration of one sample in an interleaved run: about 16 samples make a block.
SAMPLE_TIME_S = BLOCK_TIME_S / 16

#: Environment variable carrying the one-off key that authenticates the controller.
AUTHKEY_ENV = "INFPERF_AB_AUTHKEY"
#: Environment variable carrying the project's options for the worker (a JSON list of
#: option lists, :class:`~pytest_infperf.core.cmdline.Forwarded`): the worker adds those its
#: checkout defines and lists the others in ``collected``'s ``dropped``.
OPTIONS_ENV = "INFPERF_AB_OPTIONS"
#: Environment variable carrying the session's heap policy (infperf_expert's heap), which the worker
#: applies before its own session starts (:mod:`~pytest_infperf.measure.heap`).
HEAP_ENV = "INFPERF_AB_HEAP"
#: Environment variable carrying the controller's run-wide benchmark options (JSON; see
#: ``core.keys.served_layer_key``).
LAYER_ENV = "INFPERF_AB_LAYER"
#: Environment variable carrying the controller's PID: the worker ends when its parent is
#: not that process any more (the controller is gone), even before it could look.
PARENT_ENV = "INFPERF_AB_PARENT"
#: Environment variable carrying what the head imports of its repository (JSON,
#: :class:`~pytest_infperf.ab.imports.ImportMap`): the worker imports the project from its
#: own checkout by it, and says in each ``ready`` where its project modules came from.
IMPORTS_ENV = "INFPERF_AB_IMPORTS"
#: Environment variable carrying the folder the worker works in: where the controller's
#: pytest was invoked, mapped into the worker's checkout.
CWD_ENV = "INFPERF_AB_CWD"
#: Environment variable carrying the folder where the base side's processes record where
#: their project modules came from (:mod:`~pytest_infperf.ab.interpreter`): the worker
#: sends what its tests' processes recorded with each ``ready`` (``children``).
CHILDREN_ENV = "INFPERF_AB_CHILDREN"

# controller -> worker
RUN = "run"
BLOCK = "block"
FINISH = "finish"
SKIP = "skip"
END = "end"
QUIT = "quit"
PROFILE = "profile"

# worker -> controller
COLLECTED = "collected"
READY = "ready"
SAMPLES = "samples"
RESULT = "result"
DONE = "done"
ERROR = "error"
PROFILED = "profiled"

#: What this worker serves beyond the first protocol (``collected``'s ``features``).
FEATURES = ("profile",)


class Ready(TypedDict):
    """The worker is inside ``infer_bench(..., name=name)``, warmed up and waiting."""

    ev: str
    name: str | None
    backend: str
    env: dict[str, Any]
    info: dict[str, Any]
    block: int
    #: Seconds per call at warmup: the controller's first guess of a block's length.
    per_call_s: float
    #: Where each of the project's modules this process imported came from (module ->
    #: file; :class:`~pytest_infperf.ab.proof.Origins`), None where it was not told what
    #: the project is.
    origins: dict[str, str] | None
    #: The same for the other processes of this side (those its tests started): each
    #: ``{"pid": ..., "origins": {module: file}}``.
    children: list[dict[str, Any]]


class Done(TypedDict):
    """The worker's test ended: ``outcome`` is pytest's (passed, failed, skipped, missing),
    ``longrepr`` the tail of its error when it failed."""

    ev: str
    nodeid: str
    outcome: str
    longrepr: str
