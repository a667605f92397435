"""One source per figure: every figure the README's "What it has shown" table quotes is in the section it links.

Each row of that table carries its figures (and intervals) and a date, and links one section of a
results file (``docs/RESULTS.md#anchor``, ``benchmarks/PERFORMANCE.md#anchor``). The check reads the
linked section (its heading down to the next heading of the same or a higher level) and looks for
every number of the figure cell and the date of the date cell there, so a figure changed in the
results file and not in the README (or the other way round) fails ``make test``, naming the row.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TABLE_HEADING = "## What it has shown"
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?:/\d{2})?")
#: a number as the docs write one: 13/28, -0.15, 10,214, 4e-4, 0.84 (of 0.84%), 93.3 (of B* 93.3)
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:,\d{3})*(?:\.\d+)?(?:e-?\d+)?(?:/\d+)?")
_LINK = re.compile(r"\]\(([^)#]+)#([^)]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def section(markdown: str, anchor: str) -> str | None:
    """The text under the heading whose anchor is ``anchor``, down to the next heading of its level or above."""
    lines = markdown.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^(#+) (.*)$", line)
        if m and slug(m.group(2)) == anchor:
            level = len(m.group(1))
            body = []
            for nxt in lines[i + 1 :]:
                h = re.match(r"^(#+) ", nxt)
                if h and len(h.group(1)) <= level:
                    break
                body.append(nxt)
            return "\n".join(body)
    return None


def table_rows(readme: str) -> list[tuple[int, list[str]]]:
    """(line number, cells) of each body row of the README's "What it has shown" table."""
    lines = readme.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == TABLE_HEADING)
    rows = []
    for n in range(start + 1, len(lines)):
        line = lines[n]
        if line.startswith("## "):
            break
        if line.startswith("|") and not re.match(r"^\|[-| ]+\|$", line):
            rows.append((n + 1, [c.strip() for c in line.strip().strip("|").split(" | ")]))
    return rows[1:]  # the header row


def _found(token: str, text: str) -> bool:
    return re.search(r"(?<![\w.])" + re.escape(token) + r"(?![\d])", text) is not None


def mismatches(readme: str, root: Path = ROOT) -> list[str]:
    """Each figure or date of a row that its linked section does not hold, as 'README.md:line: ...'."""
    problems = []
    rows = table_rows(readme)
    if not rows:
        return [f"README.md: no rows under {TABLE_HEADING!r}"]
    for n, cells in rows:
        if len(cells) != 5:
            problems.append(
                f"README.md:{n}: {len(cells)} cells, expected claim | holds? | figure | machine, date | where"
            )
            continue
        _, _, figure, when, where = cells
        link = _LINK.search(where)
        if not link:
            problems.append(f"README.md:{n}: no link to a results section in {where!r}")
            continue
        path, anchor = root / link.group(1), link.group(2)
        text = section(path.read_text(encoding="utf-8"), anchor) if path.is_file() else None
        if text is None:
            problems.append(f"README.md:{n}: {link.group(1)}#{anchor} is not a section")
            continue
        dates = _DATE.findall(when)
        if not dates:
            problems.append(f"README.md:{n}: no date in {when!r}")
        for date in dates:
            if date not in text:
                problems.append(f"README.md:{n}: date {date} is not in {link.group(1)}#{anchor}")
        for token in _NUMBER.findall(_DATE.sub(" ", figure.replace("\\", ""))):
            if not _found(token, text):
                problems.append(f"README.md:{n}: figure {token} is not in {link.group(1)}#{anchor}")
    return problems


def test_every_readme_figure_is_in_the_results_section_it_links():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(table_rows(readme)) >= 10
    problems = mismatches(readme)
    assert not problems, "README and the results files disagree:\n" + "\n".join(problems)


def test_the_check_fails_when_one_figure_changes():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    n, cells = table_rows(readme)[0]
    figure = cells[2]
    first = _NUMBER.search(figure)
    assert first is not None
    changed_figure = figure[: first.start()] + first.group() + "1" + figure[first.end() :]  # 138 -> 1381
    changed = readme.replace(figure, changed_figure, 1)
    problems = mismatches(changed)
    assert problems and all(p.startswith(f"README.md:{n}:") for p in problems), problems
    assert f"figure {first.group()}1 " in problems[0]


def test_the_check_fails_when_a_date_or_a_link_is_wrong():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    n, cells = table_rows(readme)[0]
    date = _DATE.search(cells[3])
    assert date is not None
    wrong_date = readme.replace(cells[3], cells[3].replace(date.group(), "2020-01-01"), 1)
    assert any("date 2020-01-01" in p for p in mismatches(wrong_date))
    wrong_link = readme.replace(cells[4], cells[4].replace("#", "#no-such-", 1), 1)
    assert any("is not a section" in p for p in mismatches(wrong_link))


def test_slug_matches_github_anchors():
    assert slug("1. The predictions on the reference trainer's tiny task") == (
        "1-the-predictions-on-the-reference-trainers-tiny-task"
    )
    assert slug("3a. On the synthetic task (policy v3)") == "3a-on-the-synthetic-task-policy-v3"
    assert slug("5. The failure clock on real runs: failure means collapse") == (
        "5-the-failure-clock-on-real-runs-failure-means-collapse"
    )
