"""The README and docs/ stay true: the two commands first, every option and flag documented,
every link pointing at a file that exists."""

from __future__ import annotations

import re

from pytest_infperf.core import options, session_table, settings

from .conftest import ROOT

README = (ROOT / "README.md").read_text()
USAGE = (ROOT / "docs" / "USAGE.md").read_text()


def test_readme_opens_with_the_two_commands() -> None:
    block = README.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert [line.split("#")[0].strip() for line in block] == [
        "bash scripts/main-job.sh",
        "bash scripts/test.sh",
    ]
    assert (ROOT / "scripts" / "main-job.sh").is_file()
    assert (ROOT / "scripts" / "test.sh").is_file()


def test_the_main_job_says_the_readmes_time() -> None:
    """The script prints how long it takes: the README's measured range, not its own."""
    readme = re.search(r"\((\d+(?:\.\d+)?)-(\d+(?:\.\d+)?) min on a 2-core machine", README)
    script = (ROOT / "scripts" / "main-job.sh").read_text()
    said = re.search(r"It takes (\d+(?:\.\d+)?) to (\d+(?:\.\d+)?) minutes", script)
    assert readme and said and readme.groups() == said.groups()


def test_readme_is_a_short_lead_in() -> None:
    assert len(README.splitlines()) <= 170


def test_every_option_and_flag_is_documented() -> None:
    """docs/USAGE.md names every flag, ini key, benchmark option and expert setting the
    tables generate; the user's surface (each setting once, however it is given) stays
    small: the expert ones are grouped under one key."""
    shown = [s for s in session_table.TABLE if not s.hidden]
    flags = [s.flag_name for s in shown if s.flag is not None]
    flags += [spec.flag_name for spec in options.FLAG_OPTIONS]
    assert not [f for f in flags if f not in USAGE]
    assert not [name for name in options.DEFAULTS if f"`{name}`" not in USAGE]
    ini = [s.ini_key for s in shown if s.ini] + [session_table.EXPERT_KEY]
    assert not [name for name in ini if name not in USAGE]
    assert not [name for name in settings.expert_names() if f"`{name}`" not in USAGE]
    surface = [s for s in shown if not s.expert] + [
        spec for spec in options.SPECS.values() if not spec.expert
    ]
    assert len(surface) + 1 <= 36, [getattr(s, "name", s) for s in surface]


def test_links_point_at_files() -> None:
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#:]+)\)", path.read_text()):
            assert (path.parent / target).exists(), f"{path.name} links to missing {target}"


def test_the_interleaved_design_is_what_comparing_md_says() -> None:
    """docs/COMPARING.md states the plan's constants; they are read from the code here."""
    from pytest_infperf.judge.plan import Design

    text = " ".join((ROOT / "docs" / "COMPARING.md").read_text().split())
    d = Design()
    shares = [f"{x:g}" for x in d.shares]
    assert f"spend {', '.join(shares[:-1])} and {shares[-1]} of alpha" in text
    assert abs(sum(d.shares) - 1.0) < 1e-9  # each bound spends all of alpha over the looks
    from pytest_infperf.stats.sequential import boundaries

    z = ", ".join(f"{v:.2f}" for v in boundaries(0.05, d.shares))
    assert f"about {z} standard errors" in text
    assert f"never taken below {d.tau_floor:.0%}" in text
    assert f"pairs 2 to {d.max_pairs} are worker processes" in text
    ordinal = {4: "fourth", 5: "fifth", 6: "sixth", 8: "eighth"}[d.max_pairs]
    assert f"after the {ordinal} pair" in text
    assert f"over up to {['', '', '', '', 'four', 'five', 'six'][d.max_pairs]}" in " ".join(
        (ROOT / "README.md").read_text().split()
    )


def test_the_version_is_the_changelogs_latest_release() -> None:
    import pytest_infperf

    version = re.search(r'^version = "([^"]+)"$', (ROOT / "pyproject.toml").read_text(), re.M)
    assert version and pytest_infperf.__version__ == version.group(1)
    changelog = (ROOT / "CHANGELOG.md").read_text()
    released = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d\d-\d\d$", changelog, re.M)
    assert released and released[0] == version.group(1)
