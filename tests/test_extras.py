"""Each extra installs what its features import: `all` means all (a CPU machine's all)."""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import sys

import pytest

from .conftest import ROOT

if sys.version_info < (3, 11):  # pragma: no cover - tomllib is 3.11+
    pytest.skip("tomllib needs Python 3.11", allow_module_level=True)
import tomllib

#: Distribution -> the module the plugin imports from it.
MODULE = {
    "torch": "torch",
    "onnxruntime": "onnxruntime",
    "onnxruntime-gpu": "onnxruntime",
    "onnx": "onnx",
    "onnxscript": "onnxscript",
    "transformers": "transformers",
    "matplotlib": "matplotlib",
    "nvidia-ml-py": "pynvml",
}
#: What each feature imports, by distribution (the reason each extra exists).
FEATURES = {
    "onnx": {"onnxruntime", "onnx", "onnxscript"},  # torch.onnx.export needs onnxscript
    "hf": {"transformers"},
    "report": {"matplotlib"},  # infperf report
    "torch": {"torch"},
}


def extras() -> dict[str, set[str]]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {
        name: {re.split(r"[<>=!~\[; ]", spec, maxsplit=1)[0].lower() for spec in specs}
        for name, specs in meta["optional-dependencies"].items()
    }


def test_each_extra_brings_what_its_feature_imports() -> None:
    found = extras()
    for extra, needs in FEATURES.items():
        assert needs <= found[extra], f"[{extra}] lacks {sorted(needs - found[extra])}"
    # The GPU variant of onnx swaps onnxruntime for onnxruntime-gpu, never both.
    assert {"onnx", "onnxscript", "onnxruntime-gpu"} <= found["onnx-gpu"]
    assert "onnxruntime" not in found["onnx-gpu"]


def test_all_means_all() -> None:
    found = extras()
    everything = set().union(*(found[e] for e in FEATURES))
    assert found["all"] == everything, (
        f"[all] lacks {sorted(everything - found['all'])}, "
        f"has extra {sorted(found['all'] - everything)}"
    )


@pytest.mark.parametrize("dist", sorted(extras()["all"]))
def test_what_all_promises_imports(dist: str) -> None:
    """.ci/run installs `.[all,dev]`: each distribution of `all` is there and imports."""
    try:
        importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        pytest.fail(f"{dist} (from the [all] extra) is not installed: pip install -e '.[all]'")
    importlib.import_module(MODULE[dist])
