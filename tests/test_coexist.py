"""Living beside other plugins: pytest-benchmark (the dev extra pins 5.2.3, the last
release that warns at start-up under xdist) and a project whose warnings are errors."""

from __future__ import annotations

import pytest

from .conftest import FAST_INI

SUITE = """
def test_model(infer_bench):
    infer_bench(lambda: sum(range(100)))
"""


@pytest.mark.slow
def test_pytest_benchmark_under_xdist_with_warnings_as_errors(
    pytester: pytest.Pytester, all_plugins: None
) -> None:
    pytest.importorskip("xdist")
    benchmark = pytest.importorskip("pytest_benchmark")
    from pytest_infperf.session.coexist import DEFERRED_FROM, IGNORE, WITHOUT, _release

    if _release(benchmark.__version__) >= DEFERRED_FROM:
        pytest.skip(f"pytest-benchmark {benchmark.__version__} no longer warns at start-up")
    pytester.makefile(".ini", pytest=FAST_INI + "filterwarnings = error\n")
    pytester.makepyfile(test_model=SUITE)
    # Left alone, pytest-benchmark's warning would be an internal error with a traceback;
    # the run stops before it, saying why and what to do.
    result = pytester.runpytest_subprocess("-n", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "INTERNALERROR" not in err + result.stdout.str()
    assert f"ERROR: pytest-benchmark {benchmark.__version__} is installed" in err
    assert WITHOUT in err and repr(IGNORE) in err and "5.3.0 or later" in err
    # The first fix it names: the benchmark is measured under xdist as ever.
    result = pytester.runpytest_subprocess("-n", "2", WITHOUT)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["measured on 2 xdist workers*"])


def test_the_filters_in_force_decide_as_warnings_does() -> None:
    """The first matching filter decides (-W and filterwarnings lines added later come
    first), by category, message and module."""
    import warnings

    from pytest_infperf.session.coexist import would_be_an_error

    class Loud(UserWarning):
        pass

    def error(*filters: tuple[str, ...]) -> bool:
        with warnings.catch_warnings():
            warnings.resetwarnings()
            for f in filters:
                warnings.filterwarnings(*f)
            return would_be_an_error(Loud, "Benchmarks are disabled", "pytest_benchmark.logger")

    assert error(("error",))
    assert not error(("error",), ("ignore", "", Loud))
    assert error(("ignore", "", Loud), ("error",))
    assert not error(("error",), ("ignore", "benchmarks are"))  # the message, any case
    assert not error(("error",), ("ignore", "", Warning, "pytest_benchmark"))
    assert error(("error",), ("ignore", "", Warning, "somewhere_else"))
    assert not error(("default",))
