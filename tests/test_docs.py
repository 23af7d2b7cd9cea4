"""The README and docs/ stay true: the two commands first, every option and flag documented,
every link pointing at a file that exists."""

from __future__ import annotations

import re

from pytest_infperf.core import options, settings

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
    # The second names the slow tier, and CI runs both tiers.
    assert "bash scripts/test.sh --slow" in block[1]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert "bash scripts/test.sh" in ci and "bash scripts/test.sh --slow" in ci


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
    shown = [s for s in options.SESSION if not s.hidden]
    flags = [s.flag_name for s in shown if s.flag is not None]
    flags += [spec.flag_name for spec in options.FLAG_OPTIONS]
    assert not [f for f in flags if f not in USAGE]
    assert not [name for name in options.DEFAULTS if f"`{name}`" not in USAGE]
    ini = [s.ini_key for s in shown if s.ini] + [options.EXPERT_KEY]
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
    ordinal = {4: "fourth", 5: "fifth", 6: "sixth", 8: "eighth", 12: "twelfth"}[d.max_pairs]
    assert f"after the {ordinal} pair" in text
    words = ["", "", "", "", "four", "five", "six", "seven", "eight", "", "", "", "twelve"]
    assert f"over up to {words[d.max_pairs]}" in " ".join((ROOT / "README.md").read_text().split())


def test_the_version_is_the_changelogs_latest_release() -> None:
    import pytest_infperf

    version = re.search(r'^version = "([^"]+)"$', (ROOT / "pyproject.toml").read_text(), re.M)
    assert version and pytest_infperf.__version__ == version.group(1)
    changelog = (ROOT / "CHANGELOG.md").read_text()
    released = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d\d-\d\d$", changelog, re.M)
    assert released and released[0] == version.group(1)


def _texts() -> dict[str, str]:
    """Every file a reader or maintainer reads a claim in: the docs, the code, the tests,
    the scripts."""
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for folder in ("pytest_infperf", "tests", "benchmarks", "scripts", "examples"):
        paths += sorted((ROOT / folder).rglob("*.py")) + sorted((ROOT / folder).rglob("*.sh"))
    return {str(p.relative_to(ROOT)): p.read_text() for p in paths}


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_measured_section_named_exists() -> None:
    """A comment or a doc that sends its reader to a section of docs/MEASURED.md (its
    heading in quotes after the file's name and a comma, or a link to its anchor) finds
    that section there."""
    measured = (ROOT / "docs" / "MEASURED.md").read_text()
    headings = list(re.findall(r"^#+ (.+)$", measured, re.M))
    anchors = {_anchor(h) for h in headings}
    missing = []
    for name, text in _texts().items():
        flat = re.sub(r"\s+#?:?\s*", " ", text)  # a name wrapped over comment lines
        for section in re.findall(r"MEASURED\.md, \"([^\"]+)\"", flat):
            if section not in headings:
                missing.append(f"{name}: {section!r}")
        for anchor in re.findall(r"MEASURED\.md#([\w-]+)", text):
            if anchor not in anchors:
                missing.append(f"{name}: #{anchor}")
    assert not missing


def test_every_document_named_exists() -> None:
    """The code and the docs cite only documents the repository holds (the code once cited
    a STATISTICS.md it did not have): every ``NAME.md`` named in a comment, a docstring or a
    doc is a file of the repository's root or docs/."""
    here = {p.name for p in [*ROOT.glob("*.md"), *(ROOT / "docs").glob("*.md")]}
    here.add("BODY.md")  # infperf comment's --body-file argument, a placeholder
    missing = []
    for name, text in _texts().items():
        if name == "tests/test_docs.py":  # this test names what must not be cited
            continue
        for cited in re.findall(r"\b([A-Z][A-Za-z_]*\.md)\b", text):
            if cited not in here:
                missing.append(f"{name}: {cited}")
    assert not missing


def test_benchmarks_holds_what_the_docs_cite() -> None:
    """benchmarks/ holds the scripts whose figures the docs show, and nothing else: each is
    named in the README or docs/, and each script the docs name exists."""
    docs = "\n".join(
        p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    )
    scripts = {p.name for p in (ROOT / "benchmarks").iterdir() if p.suffix in (".py", ".sh")}
    assert not sorted(s for s in scripts if f"benchmarks/{s}" not in docs)
    named = set(re.findall(r"benchmarks/(\w+\.(?:py|sh))", docs))
    assert not sorted(named - scripts)


def test_measured_stays_short_and_leads_with_the_current_figures() -> None:
    """docs/MEASURED.md is read, not archived: at most 600 lines (older tables live in its
    git history, which its opening names), the GPU runner's figures first."""
    measured = (ROOT / "docs" / "MEASURED.md").read_text()
    assert len(measured.splitlines()) <= 600
    assert "git show" in measured.split("\n## ", 1)[0]
    assert re.findall(r"^## (.+)$", measured, re.M)[0] == "A GPU runner's host"
