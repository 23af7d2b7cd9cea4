"""The plugin loads without ML frameworks and never imports them by itself."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

FRAMEWORKS = ("torch", "onnxruntime", "transformers", "onnx")

# Makes the frameworks unimportable, as on a machine where they are not installed.
BLOCKER = """
import importlib.abc, sys

class _Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ImportError(f"No module named {{name!r}} (blocked by the test)")
        return None

sys.meta_path.insert(0, _Block())
"""


def test_plugin_load_imports_nothing_heavy() -> None:
    code = textwrap.dedent(
        """
        import sys
        # everything pytest_configure imports, whatever the flags
        import pytest_infperf.plugin, pytest_infperf.core.settings, pytest_infperf.core.keys
        from pytest_infperf.session import context, modes, collector, artifacts
        from pytest_infperf.session import terminal, xdist, outcome, selection
        from pytest_infperf.measure import gpu, gpupin, heap
        heavy = {"numpy", "scipy", "torch", "onnxruntime", "transformers", "git", "psutil"}
        loaded = sorted(heavy & {m.split(".")[0] for m in sys.modules})
        print("LOADED", loaded)
        assert not loaded, loaded
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_pytest_startup_with_plugin_imports_no_framework(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_plain():\n    pass\n")
    script = pytester.path / "run.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys, pytest
            rc = pytest.main(["-q", "-p", "no:cacheprovider", "test_startup_file.py"])
            loaded = sorted({m.split(".")[0] for m in sys.modules} & %r)
            print("LOADED", loaded)
            sys.exit(10 if loaded else rc)
            """
        ).replace("%r", repr(set(FRAMEWORKS) | {"numpy", "scipy"}))
    )
    pytester.makepyfile(test_startup_file="def test_plain():\n    pass\n")
    out = subprocess.run(
        [sys.executable, str(script)], cwd=pytester.path, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_plain_callables_work_without_frameworks(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_plain="""
        import sys

        def test_callable(infer_bench):
            r = infer_bench(lambda: sum(range(100)), max_time=0.05)
            assert r.backend == "callable" and r.median > 0

        def test_frameworks_absent():
            import pytest
            for name in ("torch", "onnxruntime", "transformers"):
                with pytest.raises(ImportError):
                    __import__(name)
        """,
        test_missing_backend="""
        import pytest
        from pytest_infperf import BackendError

        def test_onnx_path_without_onnxruntime(infer_bench, tmp_path):
            path = tmp_path / "m.onnx"
            path.write_bytes(b"not really onnx")
            with pytest.raises(BackendError, match=r"onnxruntime is not installed.*"
                               r"pip install 'pytest-infperf\\[onnx\\]'"):
                infer_bench(path, {"x": 1})

        def test_hf_without_transformers():
            from pytest_infperf import hf
            with pytest.raises(BackendError, match=r"transformers is not installed.*\\[hf\\]"):
                hf.make_config("bert-base-uncased")
        """,
    )
    runner = pytester.path / "run.py"
    runner.write_text(
        BLOCKER.format(blocked=set(FRAMEWORKS))
        + textwrap.dedent(
            """
            import pytest
            raise SystemExit(pytest.main(["-p", "no:cacheprovider", "-q",
                                          "--perf-json=out.json", "-W", "ignore"]))
            """
        )
    )
    out = subprocess.run(
        [sys.executable, str(runner)], cwd=pytester.path, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "4 passed" in out.stdout
    assert Path(pytester.path / "out.json").is_file()


#: A test that looks at what the plugin may have changed in its process: a handler, a
#: thread, torch, the heap's settings, and a forked child's SIGTERM.
UNTOUCHED = """
import ctypes
import multiprocessing
import os
import signal
import signal
import sys
import threading
import time


def _mmapped_bytes():
    try:
        info = ctypes.CDLL(None).mallinfo2
    except AttributeError:  # not glibc, or glibc before 2.33
        return None
    class Mallinfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
            "uordblks", "fordblks", "keepcost")]
    info.restype = Mallinfo2
    return info().hblkhd


def test_untouched():
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert [t.name for t in threading.enumerate()] == ["MainThread"]
    assert "torch" not in sys.modules
    assert "INFPERF_RUN_ROOT" not in os.environ or not os.environ.get("HEAP_AS_GLIBC_SET_IT")
    assert "pytest_infperf.ab.sigterm" not in sys.modules  # no fork hook registered
    before = _mmapped_bytes()
    if before is not None and os.environ.get("HEAP_AS_GLIBC_SET_IT"):
        # glibc's default: a 24 MiB block is mmapped (the plugin's heap setting takes
        # blocks up to 32 MiB from the heap instead).
        libc = ctypes.CDLL(None)
        libc.malloc.restype = ctypes.c_void_p
        block = libc.malloc(24 << 20)
        grown = _mmapped_bytes() - before
        libc.free(ctypes.c_void_p(block))
        assert grown >= 24 << 20, grown
    child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(60,))
    child.start()
    time.sleep(0.3)
    child.terminate()
    child.join(30)
    assert child.exitcode == -signal.SIGTERM
"""


def _default_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.mark.skipif(sys.platform != "linux", reason="fork and glibc's heap: Linux")
@pytest.mark.parametrize("compare", [False, True], ids=["plain", "compare"])
def test_an_installed_plugin_changes_nothing_it_was_not_asked_to(
    tmp_path: Path, compare: bool
) -> None:
    """A plain run without infer_bench: no signal handler, no thread, no torch, glibc's heap
    as glibc set it, no file written; a child the test forks ends with -15 when terminated.
    A --perf-compare with a benchmark, but no worktree or workers to clean up: the same,
    but for the heap, which a comparing run settles (measure/heap.py)."""
    from .conftest import GIT_ENV, init_repo

    (tmp_path / "test_untouched.py").write_text(UNTOUCHED)
    flags: list[str] = []
    env = {**os.environ, **GIT_ENV}
    env.pop("INFPERF_RUN_ROOT", None)  # this suite's own runs may have named theirs
    if compare:
        (tmp_path / "test_bench.py").write_text(
            "def test_bench(infer_bench):\n    infer_bench(lambda: None, max_time=0.05)\n"
        )
        init_repo(tmp_path)
        flags = ["--perf-compare=HEAD", "--perf-allow-missing", "--perf-no-summary"]
    else:
        env["HEAP_AS_GLIBC_SET_IT"] = "1"

    def files() -> list[Path]:
        return sorted(
            p.relative_to(tmp_path)
            for p in tmp_path.rglob("*")
            if ".git" not in p.parts and "__pycache__" not in p.parts
        )

    before = files()
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *flags],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        # Signals at their defaults, whatever this process inherited (a background job of
        # a shell without job control ignores SIGINT): Python then installs its own.
        preexec_fn=_default_signals,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert files() == before
