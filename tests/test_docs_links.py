"""Every relative markdown link in README.md and docs/*.md points to a file that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
# [text](target) or [text](target "title"); images too
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # http:, https:, mailto:, …


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def relative_links(path: Path) -> list[str]:
    text = INLINE_CODE.sub("", FENCE.sub("", path.read_text(encoding="utf-8")))
    links = []
    for target in LINK.findall(text):
        if EXTERNAL.match(target) or target.startswith("#"):
            continue
        links.append(target.split("#", 1)[0].split("?", 1)[0])
    return links


def test_the_readme_and_docs_exist():
    assert (ROOT / "README.md").is_file()
    assert list((ROOT / "docs").glob("*.md")), "docs/ holds no reference page"


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path):
    broken = []
    for target in relative_links(path):
        resolved = (path.parent / target).resolve()
        if resolved.exists():
            continue
        broken.append(f"{target} (→ {resolved})")
    assert not broken, f"{path.relative_to(ROOT)}: links to missing files: {broken}"
