"""README.md guides and docs/*.md hold the rest: every relative link and #anchor (README.md,
ARCHITECTURE.md, docs/*.md) resolves, and the README stays short."""
import re
from pathlib import Path

import pytest

from tests.conftest import PROJECT_DIR
from tests.docs import headings

DOCS = [PROJECT_DIR / "README.md", PROJECT_DIR / "ARCHITECTURE.md", *sorted((PROJECT_DIR / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(path: Path) -> set[str]:
    """GitHub's heading ids: lower case, punctuation but `-` and `_` dropped, spaces to `-`,
    a repeated id suffixed -1, -2, ... (github/cmark-gfm's and github-slugger's rule:
    https://github.com/Flet/github-slugger/blob/master/index.js)."""
    seen: dict[str, int] = {}
    for _, _, title in headings(path.read_text()):
        slug = re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        seen.setdefault(f"{slug}-{count}" if count else slug, 1)
    return set(seen)


def links(path: Path) -> list[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)
    text = re.sub(r"`[^`\n]*`", "", text)
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_every_relative_link_resolves(path):
    broken = []
    for target in links(path):
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            broken.append(target)
        elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
            broken.append(target)
    assert broken == [], f"{path.relative_to(PROJECT_DIR)}: {broken}"


def test_the_readme_stays_a_guide():
    lines = (PROJECT_DIR / "README.md").read_text().count("\n")
    assert lines <= 260, f"README.md has {lines} lines; move detail into docs/"


def test_the_readme_links_every_docs_file():
    linked = {t.partition("#")[0] for t in links(PROJECT_DIR / "README.md")}
    assert {f"docs/{p.name}" for p in DOCS[2:]} <= linked
