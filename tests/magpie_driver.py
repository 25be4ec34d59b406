"""Runs openmagpie's `magpie` commands for tests/test_magpie_cli.py, under magpie's own Python (3.13),
without paying its start-up (a second of imports) for each one: it imports the CLI once, then for each
command forks and, in the child, does what the `magpie` console script does (`sys.exit(app())` with the
command's arguments, environment and stdin), its output going to a file.

Protocol, one JSON object a line: the test writes `{"args", "env", "stdin"}` on this process's stdin and
reads `{"code", "output"}` on its stdout. Nothing of the test suite is imported here.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

from openmagpie.cli import app


def run_one(args: list[str], env: dict[str, str], stdin: str) -> tuple[int, str]:
    with tempfile.TemporaryFile() as given, tempfile.TemporaryFile() as output:
        given.write(stdin.encode())
        given.flush()
        given.seek(0)
        pid = os.fork()
        if pid == 0:  # the command, as the console script runs it
            os.dup2(given.fileno(), 0)
            os.dup2(output.fileno(), 1)
            os.dup2(output.fileno(), 2)
            sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
            sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            os.environ.clear()
            os.environ.update(env)
            sys.argv = ["magpie", *args]
            code = 1
            try:
                app()
                code = 0
            except SystemExit as exited:
                code = exited.code if isinstance(exited.code, int) else (0 if exited.code is None else 1)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        output.seek(0)
        return os.waitstatus_to_exitcode(status), output.read().decode(errors="replace")


def main() -> None:
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    for line in sys.stdin:
        request = json.loads(line)
        code, output = run_one(request["args"], request["env"], request.get("stdin", ""))
        replies.write(json.dumps({"code": code, "output": output}) + "\n")
        replies.flush()


if __name__ == "__main__":
    main()
