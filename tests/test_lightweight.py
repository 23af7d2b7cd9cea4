"""The plugin loads without ML frameworks and never imports them by itself."""

from __future__ import annotations

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
        from pytest_infperf.session import terminal, xdist
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
