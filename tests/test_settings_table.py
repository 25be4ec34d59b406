"""The settings table of docs/operations.md is the code's: every `TIDINGS_` name the code reads (a field
of `Settings`, or a name read from or written to `os.environ` in app/) has its row, every name in the
table is read, and no other table of the docs or the README lists a setting."""

from __future__ import annotations

import re
from pathlib import Path

from app.config import Settings

ROOT = Path(__file__).resolve().parent.parent
OPERATIONS = ROOT / "docs" / "operations.md"
NAME = re.compile(r"\bTIDINGS_[A-Z0-9_]+\b")
# `os.environ["TIDINGS_X"]`, `os.environ.get("TIDINGS_X")`, `os.getenv("TIDINGS_X")`, `setdefault(...)`.
ENVIRON_USE = re.compile(
    r"""(?:environ(?:\.get|\.setdefault|\.pop)?\s*[\[(]|getenv\s*\()\s*["'](TIDINGS_[A-Z0-9_]+)["']"""
)


def table_rows(text: str, heading: str) -> list[str]:
    """The rows (header and rule excluded) of the first table under `## heading`."""
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [row for row in rows[2:]]


def first_cell(row: str) -> str:
    return row.strip("|").split(" | ", 1)[0]


def documented_settings() -> list[str]:
    names = []
    for row in table_rows(OPERATIONS.read_text(), "Settings"):
        found = NAME.findall(first_cell(row))
        assert found, f"a row of the settings table names no setting: {row[:80]!r}"
        names.extend(found)
    return names


def settings_the_code_reads() -> set[str]:
    prefix = Settings.model_config.get("env_prefix")
    assert prefix == "TIDINGS_"
    names = {f"{prefix}{field.upper()}" for field in Settings.model_fields}
    for path in (ROOT / "app").rglob("*.py"):
        names.update(ENVIRON_USE.findall(path.read_text()))
    return names


def test_the_pattern_finds_environment_reads() -> None:
    # The scan must see each way the code reaches the environment, or a setting could hide from it.
    code = """os.environ["TIDINGS_A"] = x; os.environ.get('TIDINGS_B'); os.getenv("TIDINGS_C")"""
    assert ENVIRON_USE.findall(code) == ["TIDINGS_A", "TIDINGS_B", "TIDINGS_C"]
    assert settings_the_code_reads() >= {"TIDINGS_DATABASE_URL", "TIDINGS_SCHEDULER", "TIDINGS_BASE_URL"}


def test_every_setting_the_code_reads_is_in_the_table_once() -> None:
    documented = documented_settings()
    repeated = sorted({name for name in documented if documented.count(name) > 1})
    assert not repeated, f"settings with more than one row: {repeated}"
    read = settings_the_code_reads()
    assert set(documented) == read, (
        f"read but not in the table: {sorted(read - set(documented))}; "
        f"in the table but never read: {sorted(set(documented) - read)}"
    )


def test_no_other_table_lists_settings() -> None:
    # One table: a second one (in the README or another guide) would drift from it.
    elsewhere = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text()
        if path == OPERATIONS:
            settings_rows = set(table_rows(text, "Settings"))
            text = "\n".join(line for line in text.splitlines() if line not in settings_rows)
        for line in text.splitlines():
            if line.startswith("|") and NAME.search(first_cell(line)):
                elsewhere.append(f"{path.relative_to(ROOT)}: {line[:80]}")
    assert not elsewhere, f"settings listed outside the table of docs/operations.md: {elsewhere}"
