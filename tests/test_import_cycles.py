"""No import cycle among the project's Python modules: the program (components/, config/,
__main__.py) and the tools beside it (every top-level folder of Python but the tests and
what is not ours). A cycle makes the order of imports matter, and with it which module sees
the other half-initialised. Every import counts, also one inside a function: it is a
dependency all the same; only `if TYPE_CHECKING:` blocks, which never run, do not. Read with
the stdlib's `ast`, nothing imported."""

import ast
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parent.parent
# Not the program's modules: the tests, vendored upstream files, the preview's output.
NOT_PROJECT = {"tests", "vendor", "venv", "build"}
# What hosts run, not the program's modules.
NOT_MODULES = ("components/scripts",)
# The one cycle left, being removed with config/partial.py (issue 30, "One config model");
# by name, so that any other cycle, or this one growing, fails.
KNOWN_CYCLES = {
    frozenset({"config.backup", "config.model", "config.monitoring", "config.partial"}),
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PROJECT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_folders() -> list[Path]:
    return sorted(path for path in PROJECT.iterdir()
                  if path.is_dir() and path.name not in NOT_PROJECT
                  and not path.name.startswith(".") and any(path.rglob("*.py")))


def project_modules() -> dict[str, Path]:
    paths = [PROJECT / "__main__.py"]
    for folder in project_folders():
        paths += [path for path in sorted(folder.rglob("*.py"))
                  if not any(str(path.relative_to(PROJECT)).startswith(skip)
                             for skip in NOT_MODULES)]
    return {module_name(path): path for path in paths}


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules `name` imports: `from a.b import c` is a.b.c where that is a
    module, a.b otherwise."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in runtime_nodes(ast.parse(path.read_text(), str(path))):
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                       for alias in node.names]
        for target in targets:
            # `import a.b.c` runs a, a.b and a.b.c; the module named is the dependency.
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def runtime_nodes(tree: ast.AST):
    """Every node of `tree` but those under `if TYPE_CHECKING:` (typing's, never true when
    the program runs)."""
    pending = [tree]
    while pending:
        node = pending.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and (
                    getattr(child.test, "id", None) == "TYPE_CHECKING"
                    or getattr(child.test, "attr", None) == "TYPE_CHECKING"):
                pending.extend(child.orelse)
                continue
            pending.append(child)


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(start: str) -> None:
        # Iterative, so a long chain of imports cannot exhaust the recursion limit.
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imported(name, path, set(modules)) for name, path in modules.items()}


def test_the_graph_covers_the_program_and_the_tools():
    graph = import_graph()
    for name in ("__main__", "components.cluster", "components.layouts.contract",
                 "config.model", "doctor.checks.every", "validate.__main__",
                 "contract.outputs", "cli.__main__", "policy.rules", "preview.engine", "pins.table",
                 "acceptance.nccl_results", "benchmarks.preview_scale"):
        assert name in graph, name
    assert not [name for name in graph if name.startswith(("tests.", "vendor.", "build."))]
    assert "components.layouts.contract" in graph["components.layouts.cloud"]
    assert "config.model" in graph["components.cluster"]


def test_no_import_cycle():
    found = [sorted(cycle) for cycle in cycles(import_graph()) if cycle not in KNOWN_CYCLES]
    assert not found, f"import cycles: {found}"


@pytest.mark.parametrize("graph, expected", [
    ({"a": {"b"}, "b": {"a"}}, [{"a", "b"}]),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [{"a", "b", "c"}]),
    ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
], ids=["two modules", "three, and one outside", "a chain"])
def test_cycles_are_found(graph, expected):
    assert cycles(graph) == [frozenset(cycle) for cycle in expected]


def test_imports_are_resolved_to_modules(tmp_path):
    (tmp_path / "pkg").mkdir()
    for name, text in (("__init__.py", "from typing import TYPE_CHECKING\n"
                                       "if TYPE_CHECKING:\n    from pkg.a import A\n"),
                       ("a.py", "from pkg import b\n"),
                       ("b.py", "def f():\n    from .c import thing\n"),
                       ("c.py", "import pkg.a.x\n")):
        (tmp_path / "pkg" / name).write_text(text)
    known = {"pkg", "pkg.a", "pkg.b", "pkg.c"}
    assert imported("pkg", tmp_path / "pkg/__init__.py", known) == set()
    assert imported("pkg.a", tmp_path / "pkg/a.py", known) == {"pkg.b"}
    assert imported("pkg.b", tmp_path / "pkg/b.py", known) == {"pkg.c"}
    assert imported("pkg.c", tmp_path / "pkg/c.py", known) == {"pkg.a"}
    graph = {name: imported(name, tmp_path / (name.replace(".", "/") + ".py"
                                              if name != "pkg" else "pkg/__init__.py"), known)
             for name in known}
    assert cycles(graph) == [frozenset({"pkg.a", "pkg.b", "pkg.c"})]
