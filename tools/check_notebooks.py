#!/usr/bin/env python3
"""Notebook hygiene, run by `make test`: every notebook has exactly one `parameters` cell, kernelspec python3,
no stored outputs or execution counts, an Open-in-Colab badge pointing at itself, and the Colab set-up cell.

Where the workbook lives is declared once, as pyproject.toml's `[project.urls] Repository`: every Colab badge
and clone URL (notebooks, README.md, docs/*.md) must point there. A fork changes all of them with one command:

    python tools/check_notebooks.py [FOLDER]               check FOLDER's notebooks (default: notebooks)
    python tools/check_notebooks.py --set-repo OWNER/NAME  point the declaration, badges and clone URLs there
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GITHUB = "https://github.com/"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+")
# a Colab badge's link, a `git clone` of the workbook or a link to one of its files: the repository named
END = r"(?=\.git\b|(?![A-Za-z0-9_-]|\.[A-Za-z0-9]))"  # where a repository's name ends in a text
WORKBOOK_URL = re.compile(
    r"(?:colab\.research\.google\.com/github/|clone\W+(?:-q\W+)?https://github\.com/|"
    r"github\.com/(?=[\w.-]+/[\w.-]+/(?:blob|tree)/))([A-Za-z0-9-]+/[A-Za-z0-9._-]+?)" + END
)


DECLARED = re.compile(r'^Repository = "https://github\.com/([^"]+?)/?"', re.M)  # in [project.urls]


def repository(root: Path = ROOT) -> str:
    """OWNER/NAME of the workbook on GitHub: pyproject.toml's ``[project.urls] Repository`` (read without
    tomllib, which Python 3.10 lacks)."""
    return DECLARED.search((root / "pyproject.toml").read_text()).group(1)


def _texts(root: Path) -> list[Path]:
    """The documents besides the notebooks that name the workbook's address."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def elsewhere(text: str, repo: str) -> list[str]:
    """The repositories other than ``repo`` that Colab badges or clone URLs in ``text`` point at."""
    return sorted({m for m in WORKBOOK_URL.findall(text) if m != repo})


def problems(path: Path, repo: str | None = None) -> list[str]:
    repo = repo or repository()
    nb = json.loads(path.read_text())
    found = []
    cells = nb.get("cells", [])
    tagged = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(tagged) != 1:
        found.append(f"has {len(tagged)} cells tagged 'parameters' (exactly one wanted)")
    if nb.get("metadata", {}).get("kernelspec", {}).get("name") != "python3":
        found.append("kernelspec is not python3")
    for i, cell in enumerate(cells):
        if cell.get("cell_type") == "code" and (cell.get("outputs") or cell.get("execution_count")):
            found.append(f"cell {i} stores outputs or an execution count (strip with nbstripout)")
    badge = f"colab.research.google.com/github/{repo}/blob/main/notebooks/{path.name}"
    if not any(badge in "".join(c.get("source", "")) for c in cells if c.get("cell_type") == "markdown"):
        found.append(f"has no Open-in-Colab badge linking to {badge}")
    setup = [c for c in cells[:4] if "colab-setup" in c.get("metadata", {}).get("tags", [])]
    if not setup:
        found.append("has no 'colab-setup' cell near the top")
    elif f'"{GITHUB}{repo}"' not in "".join(setup[0].get("source", "")):
        found.append(f"its 'colab-setup' cell does not clone {GITHUB}{repo}")
    other = elsewhere("".join("".join(c.get("source", "")) for c in cells), repo)
    if other:
        found.append(f"points at {', '.join(other)}, not {repo} (pyproject.toml's Repository)")
    return found


def set_repo(new: str, root: Path = ROOT) -> int:
    """Point pyproject.toml's Repository, and every badge and clone URL naming the old one, at ``new``."""
    if not NAME.fullmatch(new):
        print(f"check_notebooks: --set-repo wants OWNER/NAME as on GitHub, got {new!r}", file=sys.stderr)
        return 2
    old = repository(root)
    at = re.compile(rf"(github\.com/|/github/){re.escape(old)}" + END)
    changed = 0
    for path in (root / "pyproject.toml", *_texts(root), *sorted((root / "notebooks").glob("*.ipynb"))):
        if path.is_file():
            text = path.read_text()
            new_text = at.sub(lambda m: m.group(1) + new, text)
            if new_text != text:
                path.write_text(new_text)
                changed += 1
    print(
        f"check_notebooks: {old} -> {new} in {changed} files (commit them; the Colab badges open {new}'s "
        "main branch)"
    )
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--set-repo"] and len(argv) == 2:
        return set_repo(argv[1])
    paths = sorted(Path(argv[0] if argv else "notebooks").glob("*.ipynb"))
    if not paths:
        print(f"check_notebooks: no notebooks in {argv[0] if argv else 'notebooks'}", file=sys.stderr)
        return 1
    repo, bad = repository(), 0
    for path in paths:
        for problem in problems(path, repo):
            print(f"{path}: {problem}", file=sys.stderr)
            bad += 1
    for path in _texts(ROOT):
        if path.is_file() and elsewhere(path.read_text(), repo):
            print(
                f"{path}: points at {', '.join(elsewhere(path.read_text(), repo))}, not {repo} "
                "(pyproject.toml's Repository; a fork: --set-repo OWNER/NAME)",
                file=sys.stderr,
            )
            bad += 1
    print(f"check_notebooks: {len(paths)} notebooks, {bad} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
