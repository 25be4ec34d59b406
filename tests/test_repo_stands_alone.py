"""The repository stands alone: no file points to a document outside it (the design notes and specs it
was built from are not in a clone; what the code relies on is in docs/), and every relative link of the
README and of docs/ opens a file of the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOP_FILES = ("README.md", "Dockerfile", "docker-compose.yml", "pyproject.toml", "setup.py", "alembic.ini")
FOLDERS = ("app", "tests", "docs", "migrations", "openapi", ".ci")
SKIP_PARTS = {"node_modules", "__pycache__", ".venv", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".ini", ".html", ".js", ".css", ".txt", ".json", ""}
# Built from pieces, so that this file does not name them itself.
OUTSIDE = re.compile(
    "|".join(
        (
            re.escape("../" + "shared"),
            re.escape("CONTRACT" + ".md"),
            re.escape("ARCHITECTURE" + ".md"),
            re.escape("/work" + "/"),
            "seed" + r" 00\d",
        )
    )
)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def repo_files() -> list[Path]:
    files = [ROOT / name for name in TOP_FILES if (ROOT / name).exists()]
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and path.suffix in TEXT_SUFFIXES and not SKIP_PARTS & set(path.parts):
                files.append(path)
    return files


def test_no_file_points_outside_the_repo() -> None:
    files = repo_files()
    assert len(files) > 100 and ROOT / "README.md" in files
    found = []
    for path in files:
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert not found, "files pointing outside the repository:\n" + "\n".join(found)


def test_the_pattern_sees_what_it_looks_for() -> None:
    for line in ("See `../" + "shared/design/x`", "(CONTRACT" + ".md)", "seed" + " 001 says"):
        assert OUTSIDE.search(line), line
    assert not OUTSIDE.search("docs/compatibility.md, seeded rows")


def test_every_relative_link_of_the_docs_opens_a_file() -> None:
    broken = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in LINK.findall(doc.read_text()):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            resolved = (doc.parent / target.split("#", 1)[0]).resolve()
            if not resolved.is_relative_to(ROOT) or not resolved.exists():
                broken.append(f"{doc.relative_to(ROOT)}: {target}")
    assert not broken, f"links that open nothing in the repository: {broken}"
