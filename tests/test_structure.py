"""The shape of the package: data flows one way, and the retry path stays light."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "jobstate"
# function-local imports are allowed only here: the dispatch table, the package's lazy API,
# and start-up exceptions that say so in their comment
LAZY_BOUNDARIES = {"jobstate.main", "jobstate"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """(imported module, line, inside a function) for every import outside TYPE_CHECKING."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.ImportFrom) and child.module:
                for alias in child.names:
                    target = f"{child.module}.{alias.name}"
                    found.append((target if _is_module(target) else child.module, child.lineno, in_function))
            elif isinstance(child, ast.Import):
                found.extend((alias.name, child.lineno, in_function) for alias in child.names)
            visit(child, nested)

    visit(tree, False)
    return found


def _is_module(name: str) -> bool:
    rel = Path(*name.split("."))
    return (PACKAGE.parent / rel).with_suffix(".py").exists() or (PACKAGE.parent / rel / "__init__.py").exists()


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        name = _module_name(path)
        graph[name] = {t for t, _line, _fn in _imports(path) if t.startswith("jobstate") and t != name}
    return graph


def test_package_has_no_import_cycles_even_through_function_local_imports() -> None:
    graph = _graph()
    # the package __init__ only re-exports lazily; every module imports it implicitly, so it is no edge
    graph = {k: {t for t in v if t != "jobstate"} for k, v in graph.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycle = [*stack[stack.index(nxt) :], nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                walk(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            walk(node)
    assert "jobstate.store.transaction" in graph["jobstate.allocation.decision"]


def test_function_local_imports_only_at_the_dispatch_boundary_or_documented_start_up_exceptions() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        name = _module_name(path)
        lines = path.read_text(encoding="utf-8").splitlines()
        for _target, line, in_function in _imports(path):
            if in_function and name not in LAZY_BOUNDARIES and "start-up" not in lines[line - 1]:
                offenders.append(f"{name}:{line}: {lines[line - 1].strip()}")
    assert offenders == [], offenders


def test_core_is_pure_and_third_party_libraries_have_one_home_each() -> None:
    homes: dict[str, set[str]] = {"yaml": set(), "portalocker": set(), "git": set(), "sqlite3": set()}
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module.split(".")[0]]
            for lib in names:
                if lib in homes:
                    homes[lib].add(_module_name(path))
            if _module_name(path).startswith("jobstate.core.") and names:
                assert not {"subprocess", "os", "sqlite3", "yaml", "git", "portalocker"} & set(names), path
    assert homes == {
        "yaml": {"jobstate.store.yamlio"},
        "portalocker": {"jobstate.store.lock"},
        "git": {"jobstate.git.repo"},
        "sqlite3": {"jobstate.store.catalog"},
    }


CAPABILITIES = ("jobstate.allocation", "jobstate.paid", "jobstate.review")


def test_capability_packages_never_import_each_other() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        name = _module_name(path)
        mine = next((c for c in CAPABILITIES if name == c or name.startswith(f"{c}.")), None)
        if mine is None:
            continue
        for target, line, _in_function in _imports(path):
            other = next((c for c in CAPABILITIES if target == c or target.startswith(f"{c}.")), None)
            if other is not None and other != mine:
                offenders.append(f"{name}:{line} imports {target}")
    assert offenders == [], offenders


def _string_constants(tree: ast.AST) -> list[tuple[int, str]]:
    """Every string constant that is not a docstring, with its line."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_git_knows_nothing_of_jobstates_layout() -> None:
    offenders = []
    for path in (PACKAGE / "git").rglob("*.py"):
        name = _module_name(path)
        offenders += [f"{name}:{line} imports {t}" for t, line, _fn in _imports(path) if t == "jobstate.core.layout"]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for line, text in _string_constants(tree):
            if any(word in text for word in ("state/", "history/", "episode.yaml", "approval.yaml", ".jobstate")):
                offenders.append(f"{name}:{line} {text!r}")
    assert offenders == [], offenders


def test_no_module_is_over_500_lines() -> None:
    # a module past this holds more than one thing to read (issue 28): split it by what it holds
    long = {
        str(path.relative_to(PACKAGE.parent)): n
        for path in PACKAGE.rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > 500
    }
    assert not long, long
