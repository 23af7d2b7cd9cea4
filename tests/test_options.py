"""Options: ini < command line < marker < keyword arguments, and every bad value named."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_infperf.core import options

RECORD = """
import json, pytest

def noop():
    pass

def test_a(infer_bench):
    r = infer_bench(noop{kwargs})
    print("OPTS=" + json.dumps(r.options))
"""


def _opts(result: pytest.RunResult) -> dict[str, object]:
    import json

    for line in result.outlines:
        if "OPTS=" in line:
            return dict(json.loads(line.split("OPTS=", 1)[1]))
    raise AssertionError(result.stdout.str())


def test_defaults(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(RECORD.format(kwargs=", max_time=0.01"))
    result = pytester.runpytest("-s")
    result.assert_outcomes(passed=1)
    opts = _opts(result)
    assert opts["warmup"] == 10
    assert opts["rounds"] == 20
    assert opts["max_rounds"] == 1000
    assert opts["threshold"] == 0.05
    assert opts["alpha"] == 0.05
    assert opts["precision"] == 0.01
    assert opts["metric"] == "median"


def test_precedence_ini_cli_marker_kwargs(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        "[pytest]\ninfperf_rounds = 11\ninfperf_warmup = 3\ninfperf_threshold = 0.2\n"
        "infperf_max_time = 0.02\ninfperf_alpha = 0.1\n"
    )
    pytester.makepyfile(
        """
        import json, pytest

        def noop():
            pass

        @pytest.mark.infperf(rounds=12, threshold=0.3)
        def test_a(infer_bench):
            r = infer_bench(noop, rounds=13)
            print("OPTS=" + json.dumps(r.options))
        """
    )
    result = pytester.runpytest("-s", "--perf-threshold=0.25", "--perf-alpha=0.01")
    result.assert_outcomes(passed=1)
    opts = _opts(result)
    assert opts["warmup"] == 3  # ini only
    assert opts["alpha"] == 0.01  # command line beats ini
    assert opts["threshold"] == 0.3  # marker beats command line
    assert opts["rounds"] == 13  # keyword beats marker


def test_class_marker_and_function_marker_merge(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import json, pytest

        def noop():
            pass

        @pytest.mark.infperf(rounds=14, warmup=4, max_time=0.01)
        class TestX:
            @pytest.mark.infperf(rounds=15)
            def test_a(self, infer_bench):
                r = infer_bench(noop)
                print("OPTS=" + json.dumps(r.options))
        """
    )
    result = pytester.runpytest("-s")
    result.assert_outcomes(passed=1)
    opts = _opts(result)
    assert (opts["rounds"], opts["warmup"]) == (15, 4)


@pytest.mark.parametrize(
    ("ini", "message"),
    [
        ("infperf_rounds = 0", "*infperf_rounds='0': must be an integer >= 1*"),
        ("infperf_rounds = -3", "*infperf_rounds='-3': must be an integer >= 1*"),
        ("infperf_rounds = many", "*infperf_rounds='many': expected an integer >= 1*"),
        ("infperf_max_time = -1", "*infperf_max_time='-1': must be a number in (0, inf)*"),
        ("infperf_threshold = 1.5", "*infperf_threshold='1.5': must be a number in (0, 1)*"),
        ("infperf_threshold = abc", "*infperf_threshold='abc': expected a number in (0, 1)*"),
        ("infperf_alpha = 0.7", "*infperf_alpha='0.7': must be a number in (0, 0.5)*"),
        ("infperf_metric = p42", "*infperf_metric='p42': unknown metric; expected one of*"),
        ("infperf_expert = search_depth=x", "*search_depth='x': expected an integer*"),
        (
            "infperf_expert = gpu_throttle=ignore",
            "*gpu_throttle='ignore': expected one of exclude, keep, fail*",
        ),
        (
            "infperf_rounds = 50\ninfperf_expert = max_rounds=10",
            "*max_rounds=10 is below rounds=50*",
        ),
        ("infperf_expert = max_rounds", "*'max_rounds' is not name=value*"),
        # removed: stored verdicts alone failed unchanged code (what to use instead is said)
        ("infperf_settle = off", "*infperf_settle=off was removed: stored verdicts alone*"),
        ("infperf_expert = hep=system", "*unknown setting 'hep': did you mean heap?*"),
        (
            "infperf_max_rounds = 10",
            "*infperf_max_rounds * an expert setting: set it as infperf_expert = max_rounds=VALUE*",
        ),
    ],
)
def test_bad_ini_values_are_usage_errors(pytester: pytest.Pytester, ini: str, message: str) -> None:
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile("def test_a():\n    pass\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])
    assert "Traceback" not in result.stderr.str()


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        (
            "--perf-threshold=0",
            "*argument --perf-threshold: --perf-threshold='0': must be a number in (0, 1)",
        ),
        ("--perf-threshold=lots", "*--perf-threshold='lots': expected a number in (0, 1)"),
        ("--perf-alpha=0.5", "*--perf-alpha='0.5': must be a number in (0, 0.5)"),
        ("--perf-metric=mean", "*--perf-metric='mean': unknown metric; expected one of median*"),
        ("--perf-rounds=0", "*--perf-rounds='0': must be an integer >= 1"),
        ("--perf-settle=off", "*--perf-settle=off was removed: stored verdicts alone failed*"),
        ("--perf-settle=x", "*--perf-settle='x': expected one of auto, stored-first"),
    ],
)
def test_bad_flags_are_usage_errors(pytester: pytest.Pytester, flag: str, message: str) -> None:
    pytester.makepyfile("def test_a():\n    pass\n")
    result = pytester.runpytest(flag)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("rounds=0", "*infperf on test_bad.py::test_a: rounds=0: must be an integer >= 1*"),
        ("roundz=5", "*unknown option 'roundz' (did you mean 'rounds'?); known options:*"),
        ("threshold=2", "*threshold=2: must be a number in (0, 1)*"),
        ("metric='mean'", "*metric='mean': unknown metric*"),
        ("name='x'", "*infperf(name=...) is not allowed*"),
        ("5", "*takes keyword arguments only*"),
    ],
)
def test_bad_marker_is_a_usage_error(pytester: pytest.Pytester, marker: str, message: str) -> None:
    """A marker typo is a usage error (exit 4) naming the test, its file and line, before
    any test runs, as the ini file's and the flags' are (docs/USAGE.md)."""
    pytester.makepyfile(
        test_bad=f"""
        import pytest

        def test_ok(infer_bench):
            raise AssertionError("must not run either")

        @pytest.mark.infperf({marker})
        def test_a(infer_bench):
            raise AssertionError("must not run")
        """
    )
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "must not run" not in result.stdout.str()
    result.stderr.fnmatch_lines([f"ERROR: test_bad.py:6: {message}"])
    assert "Traceback" not in result.stderr.str()


def test_a_bad_marker_stops_only_the_runs_that_select_it(pytester: pytest.Pytester) -> None:
    """Every wrong marker of the selection is named at once, under xdist too (whose
    controller collects nothing itself); a deselected test's marker stops nothing."""
    pytester.makepyfile(
        test_bad="""
        import pytest

        def test_ok(infer_bench):
            pass

        @pytest.mark.infperf(roundz=5)
        def test_a(infer_bench):
            pass

        @pytest.mark.infperf(threshold=2)
        def test_b(infer_bench):
            pass
        """
    )
    result = pytester.runpytest("-p", "xdist", "-n", "1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: test_bad.py:6: *test_a: unknown option 'roundz'*",
            "test_bad.py:10: *test_b: threshold=2: must be a number in (0, 1)",
        ]
    )
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result = pytester.runpytest("-k", "test_ok", "--perf-disable")
    result.assert_outcomes(passed=1, deselected=2)


@pytest.mark.parametrize(
    ("ini", "args", "message"),
    [
        (
            "[pytest]\ninfperf_max_tme = 0.05\n",
            (),
            "ERROR: unknown infperf ini key infperf_max_tme in *pytest.ini: did you mean "
            "infperf_max_time?",
        ),
        (
            "[pytest]\n",
            ("-o", "infperf_setle=off"),
            "ERROR: unknown infperf ini key -o infperf_setle=...: did you mean infperf_settle?",
        ),
        (
            '[tool.pytest.ini_options]\ninfperf_treshold = "0.1"\n',
            (),
            "ERROR: unknown infperf ini key infperf_treshold in *pyproject.toml: did you mean "
            "infperf_threshold?",
        ),
        (
            "[pytest]\ninfperf_zzz = 1\n",
            (),
            "ERROR: unknown infperf ini key infperf_zzz in *: not one of the infperf_* keys "
            "(docs/USAGE.md lists them*",
        ),
    ],
    ids=["ini", "override", "pyproject", "no-close-match"],
)
def test_a_misspelt_infperf_ini_key_is_a_usage_error(
    pytester: pytest.Pytester, ini: str, args: tuple[str, ...], message: str
) -> None:
    """pytest only warns of an ini key it does not know: a misspelt threshold would let the
    gate run on the default. An infperf_* key the plugin does not know is a usage error
    naming the closest one."""
    name = "pyproject.toml" if ini.startswith("[tool.") else "pytest.ini"
    (pytester.path / name).write_text(ini)
    pytester.makepyfile("def test_a():\n    pass\n")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_other_unknown_ini_keys_stay_pytests_warning(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ninfperf_rounds = 5\nsome_other_plugins_key = 1\n")
    pytester.makepyfile("def test_a():\n    pass\n")
    result = pytester.runpytest()
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*Unknown config option: some_other_plugins_key*"])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ("rounds=-1", "*infer_bench(): rounds=-1: must be an integer >= 1*"),
        ("max_time=-0.5", "*infer_bench(): max_time=-0.5: must be a number in (0, inf)*"),
        ("bogus=1", "*infer_bench(): unknown option 'bogus'*"),
        ("rounds=2.5", "*rounds=2.5: expected an integer >= 1*"),
        ("rounds=True", "*rounds=True: expected an integer*"),
        ("rounds=30, max_rounds=20", "*max_rounds=20 is below rounds=30*"),
        ("name=''", "*a name is a non-empty string*"),
    ],
)
def test_bad_keyword_is_a_clear_value_error(
    pytester: pytest.Pytester, kwargs: str, message: str
) -> None:
    pytester.makepyfile(
        f"""
        def test_a(infer_bench):
            infer_bench(lambda: None, {kwargs})
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"E   *Error: {message}"])
    # the traceback stops at the user's call: no frames of the plugin's internals
    assert "pytest_infperf/core/options.py" not in result.stdout.str()


def test_option_table_is_consistent() -> None:
    # Every option has a parser that accepts its own default.
    for spec in options.SPECS.values():
        if spec.default is not None:
            assert spec.parse(spec.name, spec.default) == spec.default
    merged = options.merge()
    assert merged == options.BenchOptions()
    assert {k: getattr(merged, k) for k in options.DEFAULTS} == options.DEFAULTS
    # The table is the dataclass: every field is an option, every option a field.
    assert [f.name for f in dataclasses.fields(options.BenchOptions)] == list(options.SPECS)
    # A typed, frozen record: a misspelt option is an error, not a silent default.
    with pytest.raises(dataclasses.FrozenInstanceError):
        merged.threshold = 0.1  # type: ignore[misc]
    with pytest.raises(AttributeError):
        merged.treshold  # noqa: B018


def test_metric_aliases() -> None:
    assert options.parse_layer({"metric": "latency"}, "x") == {"metric": "median"}
    assert options.parse_layer({"metric": "P90"}, "x") == {"metric": "p90"}
