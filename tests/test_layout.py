"""The layout rules, read from the source: routes stay thin, kit stays below the models.

- A route module (a module of app/ named `*_routes.py`, or any module that declares a route) executes
  no SQL: it imports nothing from SQLAlchemy or psycopg but the `Session` and `sessionmaker` types and
  SQLAlchemy's exceptions, and calls no `execute`, `scalar`, `scalars` or `query` on anything, nor
  `get`, `add`, `delete`, `flush`, `refresh` and the like on a session or connection. Its queries and
  rules live in the domain's `*_service.py` (or another module without routes).
- A route module imports no other route module: what two of them share belongs in a service.
- A route module opens no session of its own: it takes the request's (`SessionDep`, `ReadSessionDep`,
  `WriteSessionDep`) or, for a write that must stand alone, `side_transaction()`; it reads no session
  factory and imports no job's `transaction()`.
- Only `app.main` (which fills it), `app.app_state` and `app.request_sessions` (below `app.app_state`, it
  reads the three session values through its own `AppDatabases` protocol) read `app.state` untyped; the
  rest go through `app_state()` and `SettingsDep`.
- No `async def` in app/ enters a synchronous transaction (`transaction()`, `side_transaction()`): its
  I/O would block the event loop. Jobs and routes run those in a worker thread.
- `app.kit` imports nothing from `app.models`.
- In the domains (mail, feeds, watches) a module that declares no route imports nothing from fastapi or
  starlette: services take sessions, ids and values (a listing's `Paging`), and routes build responses.
  The HTTP glue is named here: each domain's router, the watches' dependencies, mail's request input
  reader (bodies, paging, path ids), the hosted forms' pages and the public pages' shared 429 (HTML
  responses).
- A column named `state`, `status`, `kind` or `plan` is a `StateColumn` of a `StrEnum`, never a bare
  string (but those that hold no closed set: a refusal's RFC 3463 status code, a feed's kind).
- No import cycle in app/: every import counts, those made inside a function or only for the type
  checker (`if TYPE_CHECKING:`) too, and importing `a.b.c` imports the packages `a.b` and `a` as well.
- A service (a public function of a `*_service.py` module) returns typed results: ORM rows, small
  dataclasses, the response models. Its return annotation holds no `Any` (so no `dict[str, Any]`):
  free-form client JSON goes by a name of its own (`JsonObject`), and only the names listed here may
  stand for `dict[str, Any]` (that one, and the contact listings' envelope for orjson).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parent.parent / "app"

ROUTE_DECORATORS = {"get", "post", "put", "patch", "delete", "head", "options", "api_route", "websocket"}
# SQLAlchemy names a route may use: the session's types, and the exceptions it raises.
ALLOWED_SQLALCHEMY = {"sqlalchemy.orm": {"Session", "sessionmaker"}, "sqlalchemy.exc": None}
SQL_DRIVERS = ("psycopg", "psycopg_pool", "sqlite3", "asyncpg")
# Called on anything, these run SQL.
SQL_CALLS = {"execute", "executemany", "exec_driver_sql", "scalar", "scalars", "query"}
# Called on a session or a connection, these run SQL (or write rows at the next flush).
SESSION_CALLS = {
    "get",
    "get_one",
    "add",
    "add_all",
    "delete",
    "merge",
    "flush",
    "refresh",
    "expire",
    "bulk_save_objects",
    "bulk_insert_mappings",
    "bulk_update_mappings",
}


def module_name(path: Path) -> str:
    parts = path.relative_to(APP.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def declares_routes(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in node.decorator_list:
                call = decorator.func if isinstance(decorator, ast.Call) else decorator
                if isinstance(call, ast.Attribute) and call.attr in ROUTE_DECORATORS:
                    return True
        # A router class passing routes on to its base (kit's V1Router) declares none itself.
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"add_api_route", "add_route", "add_api_websocket_route"}
            and receiver_name(node.func.value) != "super"
        ):
            return True
    return False


def is_route_module(name: str, tree: ast.Module) -> bool:
    return name.endswith("_routes") or declares_routes(tree)


def imported_modules(tree: ast.Module) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every import, `from a import b` also as module `a.b` (b may be one)."""
    found: list[tuple[int, str, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [alias.name for alias in node.names]
            found.append((node.lineno, node.module, names))
            found.extend((node.lineno, f"{node.module}.{name}", []) for name in names)
    return found


def receiver_name(node: ast.expr) -> str:
    """`session` of `session.get(...)`, `state.session` of `self.state.session.add(...)`, '' otherwise."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call):
        return receiver_name(node.func)
    return ""


def is_session_like(name: str) -> bool:
    lowered = name.lower()
    return "session" in lowered or lowered in {"conn", "connection", "cursor", "cur", "db"}


def sql_problems(tree: ast.Module) -> list[str]:
    problems: list[tuple[int, str]] = []
    for line, module, names in imported_modules(tree):
        root = module.split(".")[0]
        if root in SQL_DRIVERS:
            problems.append((line, f"imports {module}"))
        elif root == "sqlalchemy" and names:
            allowed = ALLOWED_SQLALCHEMY.get(module, set())
            if allowed is not None:
                extra = sorted(set(names) - allowed)
                if extra:
                    problems.append((line, f"imports {', '.join(extra)} from {module}"))
        elif module == "sqlalchemy":
            problems.append((line, "imports sqlalchemy"))
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        method, receiver = node.func.attr, receiver_name(node.func.value)
        if method in SQL_CALLS or (method in SESSION_CALLS and is_session_like(receiver)):
            problems.append((node.lineno, f"calls {receiver or '...'}.{method}()"))
    return [f"line {line}: {problem}" for line, problem in sorted(problems)]


def session_problems(tree: ast.Module) -> list[str]:
    problems: list[tuple[int, str]] = []
    for line, module, _names in imported_modules(tree):
        if module == "app.db.transaction":
            problems.append((line, "imports app.db.transaction"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.endswith("session_factory"):
            problems.append((node.lineno, f"reads {node.attr}"))
    return [f"line {line}: {problem}" for line, problem in sorted(problems)]


def untyped_state_problems(tree: ast.Module) -> list[str]:
    """`<anything>.app.state` read as it is, rather than through app_state()."""
    return [
        f"line {node.lineno}: reads .app.state"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == "state"
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "app"
    ]


SYNC_TRANSACTIONS = {"transaction", "side_transaction"}


def loop_transaction_problems(tree: ast.Module) -> list[str]:
    problems: list[str] = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.AsyncFunctionDef):
            continue
        pending = list(ast.iter_child_nodes(function))
        while pending:
            node = pending.pop()
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                continue  # a nested function runs wherever it is called (a worker thread, say)
            # `async with` takes only an asynchronous context manager (psycopg's AsyncConnection's
            # transaction(), say), which waits without holding the loop.
            if isinstance(node, ast.With):
                for item in node.items:
                    call = item.context_expr
                    if isinstance(call, ast.Call) and receiver_name(call.func) in SYNC_TRANSACTIONS:
                        problems.append(
                            f"line {node.lineno}: {function.name} enters {receiver_name(call.func)}()"
                        )
            pending.extend(ast.iter_child_nodes(node))
    return sorted(problems)


def route_import_problems(tree: ast.Module, route_modules: set[str]) -> list[str]:
    return [
        f"line {line}: imports the route module {module}"
        for line, module, _names in imported_modules(tree)
        if module in route_modules
    ]


def app_modules() -> dict[str, ast.Module]:
    return {
        module_name(path): ast.parse(path.read_text(encoding="utf-8"), str(path))
        for path in sorted(APP.rglob("*.py"))
        if "_migrations" not in path.parts
    }


def import_graph(modules: dict[str, ast.Module]) -> dict[str, set[str]]:
    """Each module's imports among `modules` (with the packages they sit in, but for its own)."""
    graph: dict[str, set[str]] = {}
    for name, tree in modules.items():
        targets: set[str] = set()
        for _line, module, _names in imported_modules(tree):
            if module not in modules:
                continue
            parts = module.split(".")
            for end in range(1, len(parts) + 1):
                target = ".".join(parts[:end])
                if target in modules and target != name and not name.startswith(target + "."):
                    targets.add(target)
        graph[name] = targets
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        cycles.append(sorted(component))
    return cycles


MODULES = app_modules()
ROUTE_MODULES = {name for name, tree in MODULES.items() if is_route_module(name, tree)}


def test_the_route_modules_are_found() -> None:
    assert {"app.mail.contact_routes", "app.feeds.feed_routes", "app.watches.watch_routes"} <= ROUTE_MODULES
    assert "app.mail.contact_service" not in ROUTE_MODULES
    # Every route module of a domain says so by its name.
    for name in ROUTE_MODULES:
        if name.startswith(("app.mail.", "app.feeds.", "app.watches.")):
            assert name.endswith("_routes"), name


@pytest.mark.parametrize("name", sorted(ROUTE_MODULES))
def test_route_modules_execute_no_sql(name: str) -> None:
    assert sql_problems(MODULES[name]) == [], f"{name} runs SQL: move it into a service"


@pytest.mark.parametrize("name", sorted(ROUTE_MODULES))
def test_route_modules_import_no_other_route_module(name: str) -> None:
    assert route_import_problems(MODULES[name], ROUTE_MODULES - {name}) == []


@pytest.mark.parametrize("name", sorted(ROUTE_MODULES))
def test_route_modules_open_no_session_of_their_own(name: str) -> None:
    wanted = "take the request's session (app/request_sessions.py)"
    assert session_problems(MODULES[name]) == [], f"{name}: {wanted}"


def test_no_async_function_enters_a_synchronous_transaction() -> None:
    offenders = {name: found for name, tree in MODULES.items() if (found := loop_transaction_problems(tree))}
    assert offenders == {}


def test_the_rule_finds_a_transaction_on_the_event_loop() -> None:
    source = """
async def job(self):
    with transaction(self.factory) as session:
        pass

    def in_a_thread():
        with db.transaction(self.factory) as session:
            pass

    await asyncio.to_thread(in_a_thread)

    async with pool.connection() as conn, conn.transaction():
        pass
"""
    assert loop_transaction_problems(ast.parse(source)) == ["line 3: job enters transaction()"]


def test_only_main_state_and_request_sessions_read_the_app_state_untyped() -> None:
    offenders = {
        name: problems
        for name, tree in MODULES.items()
        if name not in {"app.main", "app.app_state", "app.request_sessions"}
        for problems in [untyped_state_problems(tree)]
        if problems
    }
    assert offenders == {}


def test_app_has_no_import_cycle() -> None:
    graph = import_graph(MODULES)
    assert import_cycles(graph) == []


def test_the_rule_finds_an_import_cycle_through_a_type_only_import() -> None:
    modules = {
        "app.a": ast.parse("from app.b import thing"),
        "app.b": ast.parse("if TYPE_CHECKING:\n    from app.c import Thing"),
        "app.c": ast.parse("def f():\n    import app.a"),
        "app.d": ast.parse("from app.a import thing"),
        "app.pkg": ast.parse("from app.pkg.inner import x"),
        "app.pkg.inner": ast.parse("from app.pkg import y"),
    }
    assert import_cycles(import_graph(modules)) == [["app.a", "app.b", "app.c"]]


DOMAINS = ("app.mail", "app.feeds", "app.watches")
HTTP_GLUE = {
    "app.mail.router",
    "app.feeds.router",
    "app.watches.router",
    "app.watches.dependencies",
    "app.mail.request_input",
    "app.mail.hosted_forms.hosted_form_pages",
    "app.mail.archive.public_pages",
}


def http_imports(tree: ast.Module) -> list[str]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.lineno, node.module))
    return [
        f"line {line}: imports {module}"
        for line, module in sorted(found)
        if module.split(".")[0] in ("fastapi", "starlette")
    ]


def test_domain_modules_without_routes_speak_no_http() -> None:
    offenders = {
        name: problems
        for name, tree in MODULES.items()
        if name.startswith(DOMAINS) and name not in ROUTE_MODULES and name not in HTTP_GLUE
        for problems in [http_imports(tree)]
        if problems
    }
    assert offenders == {}


def test_the_rule_finds_http_in_a_service() -> None:
    service = ast.parse("from fastapi import Request\nimport starlette.responses\nfrom app.kit import x")
    assert http_imports(service) == ["line 1: imports fastapi", "line 2: imports starlette.responses"]


ENUM_COLUMN_NAMES = {"state", "status", "kind", "plan"}
FREE_TEXT_COLUMNS = {
    # Not a closed set of values: the enhanced status code a receiver's refusal carried (5.7.26, ...).
    "blocked_rejections.status",
    # A kind Tidings does not make stays readable, to be refused as `kind_immutable`.
    "feeds.kind",
}


def test_state_status_kind_and_plan_columns_are_enums() -> None:
    from app.models import Base
    from app.models.states import StateColumn

    bare = [
        f"{table.name}.{column.name}"
        for table in Base.metadata.sorted_tables
        for column in table.columns
        if column.name in ENUM_COLUMN_NAMES
        and f"{table.name}.{column.name}" not in FREE_TEXT_COLUMNS
        and not isinstance(column.type, StateColumn)
    ]
    assert bare == []


def test_kit_imports_nothing_from_the_models() -> None:
    offenders = [
        f"{name} line {line}: {module}"
        for name, tree in MODULES.items()
        if name == "app.kit" or name.startswith("app.kit.")
        for line, module, _names in imported_modules(tree)
        if module == "app.models" or module.startswith("app.models.")
    ]
    assert offenders == []


# The rules themselves, on modules written to break them.

BAD_ROUTES = """
from fastapi import APIRouter
from sqlalchemy import select, update
from sqlalchemy.orm import Session
from psycopg_pool import AsyncConnectionPool
from app.mail import list_routes
from app.mail.contact_routes import router as contacts

router = APIRouter()

@router.delete("/things/{id}")
def delete_thing(id: int, session: Session) -> None:
    session.execute(update(Thing).values(gone=True))
    thing = session.get(Thing, id)
    session.scalars(select(Thing)).all()
    request.app.state.read_session.flush()

@router.get("/things")
def list_things(request: Request) -> Any:
    from app.db import transaction
    with transaction(request.app.state.write_session_factory) as session:
        return thing_service.things(session)
"""

GOOD_ROUTES = """
from typing import Any
from fastapi import APIRouter
from sqlalchemy.orm import Session
from sqlalchemy.exc import SQLAlchemyError
from app.mail import contact_service

router = APIRouter()

@router.get("/things/{id}")
def get_thing(id: int, session: Session, query: dict[str, Any]) -> Any:
    limit = query.get("limit")
    return contact_service.thing(session, id, limit)
"""


def test_the_rules_catch_sql_and_route_imports_in_a_route_module() -> None:
    bad = ast.parse(BAD_ROUTES)
    assert declares_routes(bad)
    assert sql_problems(bad) == [
        "line 3: imports select, update from sqlalchemy",
        "line 5: imports psycopg_pool",
        "line 5: imports psycopg_pool.AsyncConnectionPool",
        "line 13: calls session.execute()",
        "line 14: calls session.get()",
        "line 15: calls session.scalars()",
        "line 16: calls read_session.flush()",
    ]
    routes = {"app.mail.list_routes", "app.mail.contact_routes"}
    assert route_import_problems(bad, routes) == [
        "line 6: imports the route module app.mail.list_routes",
        "line 7: imports the route module app.mail.contact_routes",
    ]
    assert session_problems(bad) == [
        "line 20: imports app.db.transaction",
        "line 21: reads write_session_factory",
    ]
    assert untyped_state_problems(bad) == ["line 16: reads .app.state", "line 21: reads .app.state"]


def test_the_rules_let_a_thin_route_module_through() -> None:
    good = ast.parse(GOOD_ROUTES)
    assert declares_routes(good)
    assert sql_problems(good) == []
    assert route_import_problems(good, {"app.mail.contact_routes"}) == []
    assert session_problems(good) == []
    assert untyped_state_problems(good) == []
    assert not declares_routes(ast.parse("def helper(session):\n    return session.get(1)\n"))


# The names that may stand for `dict[str, Any]`.
JSON_ALIASES = {
    # JSON whose shape is the client's, not ours (custom fields, an action's config, a payload).
    "JsonObject",
    # The listing envelope as plain values for orjson: the contact listings' hot path builds no model.
    "PageEnvelope",
}
# Service modules outside mail still returning untyped results on this branch (another branch types
# them); the list empties as they are typed. Mail is held to the rule in full.
NOT_YET_TYPED: set[str] = set()


ANY_WORD = re.compile(r"\bAny\b")


def untyped_returns(tree: ast.Module) -> list[str]:
    """The module's public functions whose return annotation holds `Any` (`dict[str, Any]` included)."""
    return [
        f"line {node.lineno}: {node.name} -> {ast.unparse(node.returns)}"
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and not node.name.startswith("_")
        and node.returns is not None
        and any(
            (isinstance(part, ast.Name) and part.id == "Any")
            or (isinstance(part, ast.Attribute) and part.attr == "Any")
            or (
                isinstance(part, ast.Constant) and isinstance(part.value, str) and ANY_WORD.search(part.value)
            )
            for part in ast.walk(node.returns)
        )
    ]


def json_aliases(tree: ast.Module) -> list[str]:
    """Module-level names bound to `dict[str, Any]` (`X = ...`, `X: TypeAlias = ...`, `type X = ...`)."""
    found: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        elif type(node).__name__ == "TypeAlias":  # `type X = ...` (Python 3.12)
            target, value = node.name, node.value  # type: ignore[attr-defined]
        else:
            continue
        if isinstance(target, ast.Name) and ast.unparse(value) in ("dict[str, Any]", "Dict[str, Any]"):
            found.append(target.id)
    return found


SERVICE_MODULES = sorted(name for name in MODULES if name.rsplit(".", 1)[-1].endswith("_service"))


@pytest.mark.parametrize("name", SERVICE_MODULES)
def test_services_return_typed_results(name: str) -> None:
    problems = untyped_returns(MODULES[name])
    if name in NOT_YET_TYPED:
        assert problems, f"{name} is typed now: take it out of NOT_YET_TYPED"
        return
    assert problems == [], f"{name}: return rows, a dataclass or the response model (app/<domain>/wire.py)"


def test_mail_is_held_to_the_typed_results_rule_in_full() -> None:
    assert not {name for name in NOT_YET_TYPED if name.startswith("app.mail.")}


def test_only_the_listed_names_stand_for_free_form_json() -> None:
    aliases = {f"{name}.{alias}" for name, tree in MODULES.items() for alias in json_aliases(tree)}
    assert {alias.rsplit(".", 1)[-1] for alias in aliases} <= JSON_ALIASES, aliases


def test_the_rule_finds_an_untyped_service_result() -> None:
    service = ast.parse(
        "def page(s) -> dict[str, Any]: ...\n"
        "def rows(s) -> list[dict[str, typing.Any]]: ...\n"
        "def config(s) -> JsonObject: ...\n"
        "def contact(s) -> Contact | None: ...\n"
        "def _helper(s) -> Any: ...\n"
        "async def later(s) -> 'Any': ...\n"
        "Loose = dict[str, Any]\n"
    )
    assert untyped_returns(service) == [
        "line 1: page -> dict[str, Any]",
        "line 2: rows -> list[dict[str, typing.Any]]",
        "line 6: later -> 'Any'",
    ]
    assert json_aliases(service) == ["Loose"]


def test_the_worker_imports_no_web_framework() -> None:
    """What `tidings worker` imports (the command line and the scheduler's jobs) holds no FastAPI: the
    request's session, input readers and dependencies live in modules of their own
    (`app.request_sessions`, `app.mail.request_input`, `app.kit.v1_request`), and FastAPI's import
    was a tenth of the worker's start-up CPU."""
    probe = (
        "import sys, app.cli, app.scheduler; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'fastapi'))"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=APP.parent
    )
    assert found.stdout.strip() == "[]"
