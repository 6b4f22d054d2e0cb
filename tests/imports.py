"""The program's import graph, read from the source with `ast` (nothing is imported), and
the cycles in it. Every import statement counts, wherever it is: at the top, inside a
function or under `if TYPE_CHECKING:`, since each ties the two modules together just the
same. Used by the tests that keep config/ and the rest of the project free of cycles."""

import ast
from collections.abc import Iterable
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
# Folders of the project that hold no module of the program or its tools.
NOT_CODE = {"venv", "vendor", "tests", "components/scripts", "node_modules", ".git"}


def module_name(path: Path, root: Path = PROJECT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(packages: Iterable[str], root: Path = PROJECT) -> dict[str, Path]:
    """Module name -> file, for every .py file under the given top-level folders of
    `root` (a folder's own name for a top-level module such as `__main__`)."""
    found = {}
    for package in packages:
        base = root / package
        paths = [base] if base.suffix == ".py" else sorted(base.rglob("*.py"))
        for path in paths:
            relative = path.relative_to(root).as_posix()
            if not any(relative == skip or relative.startswith(f"{skip}/") for skip in NOT_CODE):
                found[module_name(path, root)] = path
    return found


def top_level_imports(path: Path) -> set[str]:
    """The top-level packages the file at `path` imports (absolute imports only)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def _imported(tree: ast.AST, name: str, is_package: bool,
              known: Iterable[str]) -> set[str]:
    """The modules the import statements of the module `name` import: `from config
    import versions` the module config.versions, `from config.model import Host` the
    module config.model (the packages above a module are not counted: every package
    would be in a cycle with its own modules)."""
    package = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".") if package else []
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return found


def import_graph(packages: Iterable[str], root: Path = PROJECT) -> dict[str, set[str]]:
    """Module -> the modules of the same set it imports."""
    files = modules(packages, root)
    graph = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        imported = _imported(tree, name, path.name == "__init__.py", files)
        graph[name] = {other for other in imported if other in files and other != name}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The modules that import each other, directly or through others: every strongly
    connected component of more than one module (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []
    for start in sorted(graph):
        if start in index:
            continue
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
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return sorted(cycles)


def describe(cycles: list[list[str]]) -> str:
    return "; ".join(" <-> ".join(cycle) for cycle in cycles)
