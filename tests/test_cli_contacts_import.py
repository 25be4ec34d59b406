"""`tidings contacts import` on the test database (SQLite or PostgreSQL): progress (rows done, rate, ETA)
on stderr after counting the rows, a stop at the contact limit on the exact line with the command that
raises it, and the report of the rows left out."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
from sqlalchemy import text

from app.cli_commands.contacts_import import ImportProgress, progress_text
from tests.cli_runner import Tidings, tidings_fixture  # noqa: F401

OWNER = "importer@example.com"


def owner(tidings: Tidings, *options: str) -> None:
    tidings.ok("users", "create", "--email", OWNER, "--name", "Importer", "--no-password", *options)


def contacts(tidings: Tidings) -> list[str]:
    with tidings.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT contacts.email_key FROM contacts JOIN users ON users.account_id = contacts.account_id"
                " WHERE users.email_key = :e AND contacts.deleted_at IS NULL ORDER BY contacts.email_key"
            ),
            {"e": OWNER},
        )
        return [row[0] for row in rows]


def write_csv(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_progress_text_gives_rows_done_rate_and_eta() -> None:
    assert progress_text(0, 5000, 0.0) == "0/5000 rows (0%), - rows/s, ETA -"
    assert progress_text(1000, 5000, 2.0) == "1000/5000 rows (20%), 500 rows/s, ETA 0:00:08"
    assert progress_text(5000, 5000, 4.0) == "5000/5000 rows (100%), 1,250 rows/s, ETA 0:00:00"
    assert progress_text(10_000, 1_000_000, 10.0) == "10000/1000000 rows (1%), 1,000 rows/s, ETA 0:16:30"


def test_import_progress_prints_a_line_a_batch_when_stderr_is_not_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    ticks = iter([100.0, 101.0, 104.0])  # the test's clock: started, then after each batch
    progress = ImportProgress(3000, clock=lambda: next(ticks))
    progress.advance(1000)
    progress.advance(2000)
    progress.close()
    assert capsys.readouterr().err.splitlines() == [
        "imported 1000/3000 rows (33%), 1,000 rows/s, ETA 0:00:02",
        "imported 3000/3000 rows (100%), 750 rows/s, ETA 0:00:00",
    ]


def test_import_shows_progress_on_stderr_and_the_summary_on_stdout(tidings: Tidings, tmp_path: Path) -> None:
    owner(tidings)
    rows = [f"person{i}@example.com,Person,{i}" for i in range(5)]
    file = write_csv(tmp_path / "five.csv", ["email,first_name,last_name", *rows])
    result = tidings("contacts", "import", str(file), "--email", OWNER, "--batch-size", "2")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "created 5, updated 0, skipped 0 invalid\n"
    lines = result.stderr.splitlines()
    assert [line.split(" rows")[0] for line in lines] == ["imported 2/5", "imported 4/5", "imported 5/5"]
    for line in lines:
        assert re.fullmatch(r"imported \d/5 rows \(\d+%\), [\d,]+ rows/s, ETA \d+:\d\d:\d\d", line), line
    assert lines[-1].startswith("imported 5/5 rows (100%)")
    assert len(contacts(tidings)) == 5


def test_import_over_the_contact_limit_stops_at_the_line_and_names_the_command(
    tidings: Tidings, tmp_path: Path
) -> None:
    owner(tidings, "--contact-limit", "3")
    file = write_csv(
        tmp_path / "big.csv",
        [
            "email,first_name",  # line 1
            "a@example.com,A",  # 2: new (1 of 3)
            "not an email,X",  # 3: left out
            "b@example.com,B",  # 4: new (2)
            "",  # 5: blank, not a row
            "A@example.com,Again",  # 6: already in: an update, takes no place
            "c@example.com,C",  # 7: new (3): the limit is reached, not passed
            "d@example.com,D",  # 8: would be the 4th: the import stops here
            "e@example.com,E",  # 9
        ],
    )
    result = tidings("contacts", "import", str(file), "--email", OWNER, "--batch-size", "3")
    assert result.exit_code == 1, result.stdout
    assert result.stdout == ""
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith(
        f"error: stopped at line 8 of {file}: the account's contact limit of 3 is reached;"
    )
    # (a@ and A@ in one batch are one contact written twice: rows 4, contacts created 3, updated 0)
    assert "4 rows went in before it (created 3, updated 0, skipped 1 invalid)" in error
    assert f"`tidings users update {OWNER} --contact-limit N`" in error
    assert "upgrade" not in error.lower()
    assert contacts(tidings) == ["a@example.com", "b@example.com", "c@example.com"]
    # Progress stops where the import did: the 5 rows before line 8, of 7.
    assert result.stderr.splitlines()[-2].startswith("imported 5/7 rows (71%)")

    # Raised as the message says, the same file goes in whole (the rows already in are updated).
    tidings.ok("users", "update", OWNER, "--contact-limit", "5")
    out = tidings.ok("contacts", "import", str(file), "--email", OWNER)
    assert out == "created 2, updated 3, skipped 1 invalid\n"
    assert contacts(tidings)[-2:] == ["d@example.com", "e@example.com"]


def test_a_batch_over_the_limit_keeps_the_rows_before_the_stop(tidings: Tidings, tmp_path: Path) -> None:
    """One batch holding the stop: the rows before it go in, those after it do not."""
    owner(tidings, "--contact-limit", "2")
    file = write_csv(tmp_path / "one.csv", ["email", "x@example.com", "y@example.com", "z@example.com"])
    error = tidings.fails("contacts", "import", str(file), "--email", OWNER)
    assert f"stopped at line 4 of {file}" in error
    assert "2 rows went in before it" in error
    assert contacts(tidings) == ["x@example.com", "y@example.com"]


def test_rows_left_out_are_reported_with_line_value_and_reason(tidings: Tidings, tmp_path: Path) -> None:
    owner(tidings)
    file = write_csv(
        tmp_path / "messy.csv",
        [
            "Email,First_Name,Last_Name",
            "good@example.com,Good,Row",
            ",No,Email",
            '"broken@,x",Bad,Address',
            f"long@example.com,{'n' * 192},Name",
            "fine@example.com,,",
        ],
    )
    report = tmp_path / "errors.csv"
    out = tidings.ok("contacts", "import", str(file), "--email", OWNER, "--errors", str(report))
    assert out == f"created 2, updated 0, skipped 3 invalid (listed in {report})\n"
    with report.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["line", "value", "reason"]
    assert rows[1] == ["3", "", "no email"]
    assert rows[2] == ["4", "broken@,x", "email: not a valid email address"]
    assert rows[3][:2] == ["5", "n" * 192]
    assert rows[3][2].startswith("first_name: ") and "191" in rows[3][2]
    assert len(rows) == 4
    assert contacts(tidings) == ["fine@example.com", "good@example.com"]


def test_a_report_of_a_clean_file_has_its_header_only(tidings: Tidings, tmp_path: Path) -> None:
    owner(tidings)
    file = write_csv(tmp_path / "clean.csv", ["email", "clean@example.com"])
    report = tmp_path / "errors.csv"
    assert tidings.ok("contacts", "import", str(file), "--email", OWNER, "--errors", str(report)) == (
        "created 1, updated 0, skipped 0 invalid\n"
    )
    assert report.read_text(encoding="utf-8").splitlines() == ["line,value,reason"]


def test_import_refuses_before_writing_anything(tidings: Tidings, tmp_path: Path) -> None:
    owner(tidings)
    good = write_csv(tmp_path / "good.csv", ["email", "first@example.com"])
    line = tidings.fails("contacts", "import", str(good), "--email", OWNER, "--list", "987654")
    assert line == f"error: No list with the id 987654 in the account of {OWNER}."
    line = tidings.fails("contacts", "import", str(good), "--email", "nobody@example.com")
    assert line == "error: No user with the email nobody@example.com."
    # A file that is not UTF-8 halfway down fails in the counting pass, before its first rows go in.
    latin = tmp_path / "latin.csv"
    latin.write_bytes(b"email,first_name\nok@example.com,Ok\nbad@example.com,Jos\xe9\n")
    line = tidings.fails("contacts", "import", str(latin), "--email", OWNER)
    assert "is not UTF-8 text" in line
    assert contacts(tidings) == []


def test_an_unclosed_quote_fails_naming_its_line_and_imports_nothing(
    tidings: Tidings, tmp_path: Path
) -> None:
    """The operator's file: 3,008 rows, one quote opened on line 21 and never closed. Read loosely it
    imported 18 rows and exited 0, the rest of the file swallowed by one "invalid" field."""
    owner(tidings)
    rows = [f"person{i}@example.com,Person,{i}" for i in range(3008)]
    rows[19] = 'person19@example.com,"Person,19'  # line 21: the header is line 1
    file = write_csv(tmp_path / "people.csv", ["email,first_name,last_name", *rows])
    report = tmp_path / "errors.csv"
    line = tidings.fails("contacts", "import", str(file), "--email", OWNER, "--errors", str(report))
    assert line.startswith(f"error: {file}: the quote opened on line 21 is never closed")
    assert "nothing was imported" in line
    assert contacts(tidings) == []


def test_a_quote_closed_lines_later_in_a_name_fails_naming_the_line_it_opened(
    tidings: Tidings, tmp_path: Path
) -> None:
    # Closed further down, the quoted field ends cleanly and the csv module sees no error: the line
    # break inside a name is what gives it away.
    owner(tidings)
    lines = ["email,first_name,last_name", "a@example.com,Ada,L", 'b@example.com,"Bob,B']
    lines += [f"c{i}@example.com,C,{i}" for i in range(5)] + ['d@example.com,D",Dee']
    file = write_csv(tmp_path / "closed_late.csv", lines)
    line = tidings.fails("contacts", "import", str(file), "--email", OWNER)
    assert f"{file}: the first_name field quoted on line 3 runs over 7 lines (to line 9)" in line
    assert contacts(tidings) == []


def test_a_line_break_in_another_column_is_a_field_not_an_error(tidings: Tidings, tmp_path: Path) -> None:
    owner(tidings)
    file = write_csv(
        tmp_path / "notes.csv",
        ["email,notes,first_name", 'a@example.com,"two\nlines",Ada', "b@example.com,,Bob"],
    )
    assert (
        tidings.ok("contacts", "import", str(file), "--email", OWNER)
        == "created 2, updated 0, skipped 0 invalid\n"
    )
    assert contacts(tidings) == ["a@example.com", "b@example.com"]


def test_a_stray_quote_mid_field_is_kept_and_one_after_a_closing_quote_is_refused(
    tidings: Tidings, tmp_path: Path
) -> None:
    owner(tidings)
    kept = write_csv(
        tmp_path / "stray.csv",
        ["email,first_name,last_name", 'a@example.com,Ada "the",Lovelace', "b@example.com,Bob,B"],
    )
    assert (
        tidings.ok("contacts", "import", str(kept), "--email", OWNER)
        == "created 2, updated 0, skipped 0 invalid\n"
    )
    first_names = tidings.scalar("SELECT first_name FROM contacts WHERE email_key = 'a@example.com'")
    assert first_names == 'Ada "the"'
    refused = write_csv(
        tmp_path / "after_close.csv",
        ["email,first_name", "c@example.com,Cy", 'd@example.com,"Dee"x', "e@example.com,Eve"],
    )
    line = tidings.fails("contacts", "import", str(refused), "--email", OWNER)
    assert line.startswith(f"error: {refused} is not valid CSV in the record starting on line 3")
    assert contacts(tidings) == ["a@example.com", "b@example.com"]


def test_a_byte_order_mark_is_not_part_of_the_first_column(tidings: Tidings, tmp_path: Path) -> None:
    # Excel's "CSV UTF-8" starts the file with one; the email column must still be found.
    owner(tidings)
    file = tmp_path / "excel.csv"
    file.write_bytes("\ufeffEmail,First_Name\r\nbom@example.com,Bo\r\n".encode())
    assert (
        tidings.ok("contacts", "import", str(file), "--email", OWNER)
        == "created 1, updated 0, skipped 0 invalid\n"
    )
    assert contacts(tidings) == ["bom@example.com"]
