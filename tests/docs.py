"""The documentation the tests read, one section at a time: README.md and docs/*.md."""
import re

from tests.conftest import PROJECT_DIR

HEADING = re.compile(r"^(#{1,6}) (.+?)\s*$")


def headings(text: str):
    """(line index, level, title) of each heading outside fenced code blocks."""
    fence = False
    for i, line in enumerate(text.split("\n")):
        if line.startswith("```"):
            fence = not fence
        elif not fence and (m := HEADING.match(line)):
            yield i, len(m[1]), m[2]


def section(file: str, heading: str) -> str:
    """The text under `heading` in `file` (relative to the project), up to the next heading of
    the same or a higher level; fails naming both when the section is not there."""
    text = (PROJECT_DIR / file).read_text()
    lines = text.split("\n")
    found = list(headings(text))
    starts = [(i, level) for i, level, title in found if title == heading]
    assert starts, f"{file} has no section {heading!r}"
    (start, level), = starts[:1]
    end = next((i for i, lv, _ in found if i > start and lv <= level), len(lines))
    return "\n".join(lines[start:end]) + "\n"
