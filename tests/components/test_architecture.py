"""The map in ARCHITECTURE.md, held: components/ packages depend only on the packages
before them in LAYERS, and no module outside components/distributions/ names a
distribution in its code (comments and docstrings may)."""

import ast
from pathlib import Path

import pytest

COMPONENTS = Path(__file__).resolve().parents[2] / "components"
# Each package may import from itself and from those before it.
LAYERS = ["common", "distributions", "hosts", "kubernetes", "network", "aws", "addons",
          "access"]
# The composition on top may import from every package.
COMPOSITION = {"cluster", "layouts"}
DISTRIBUTION_NAMES = ("k0s", "rke2")


def modules() -> list[Path]:
    # components/scripts/ holds what hosts run, not the program's modules.
    return sorted(path for path in COMPONENTS.rglob("*.py")
                  if path.relative_to(COMPONENTS).parts[0] != "scripts")


def package_of(path: Path) -> str:
    relative = path.relative_to(COMPONENTS)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def imported_packages(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "components" and len(parts) > 1:
                found.add(parts[1])
    return found


def code_strings_and_names(tree: ast.AST) -> list[str]:
    """Every identifier and string constant of the module but its docstrings."""
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    words = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            words.append(node.value)
        elif isinstance(node, ast.Name):
            words.append(node.id)
        elif isinstance(node, ast.Attribute):
            words.append(node.attr)
        elif isinstance(node, (ast.ImportFrom, ast.Import)):
            words += [alias.name for alias in node.names] + [getattr(node, "module", "") or ""]
    return words


def test_every_package_is_in_a_layer():
    packages = {package_of(path) for path in modules()} - {"__init__"}
    assert packages - COMPOSITION == set(LAYERS)


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(COMPONENTS)))
def test_a_package_imports_only_the_layers_before_it(path):
    package = package_of(path)
    if package in COMPOSITION or package == "__init__":
        return
    allowed = set(LAYERS[:LAYERS.index(package) + 1])
    imported = imported_packages(ast.parse(path.read_text()))
    assert imported <= allowed, (
        f"{path.relative_to(COMPONENTS)} ({package}) imports {sorted(imported - allowed)}; "
        f"it may import only {LAYERS[:LAYERS.index(package) + 1]}")


@pytest.mark.parametrize("path", [p for p in modules() if package_of(p) != "distributions"],
                         ids=lambda p: str(p.relative_to(COMPONENTS)))
def test_only_the_distributions_name_one(path):
    words = code_strings_and_names(ast.parse(path.read_text()))
    named = [word for word in words if any(name in word.lower() for name in DISTRIBUTION_NAMES)]
    assert not named, f"{path.relative_to(COMPONENTS)} names a distribution in its code: {named}"


# Packages whose components take only the sections and facts they read: the whole stack
# config is for the composition (cluster, layouts) and for the one function that gathers
# a distribution's settings.
TAKE_THEIR_SETTINGS = ("common", "distributions", "hosts", "kubernetes", "network", "aws",
                       "addons", "access")
READ_THE_WHOLE_CONFIG = {Path("distributions/__init__.py")}


@pytest.mark.parametrize(
    "path", [p for p in modules() if package_of(p) in TAKE_THEIR_SETTINGS
             and p.relative_to(COMPONENTS) not in READ_THE_WHOLE_CONFIG],
    ids=lambda p: str(p.relative_to(COMPONENTS)))
def test_components_take_only_the_settings_they_read(path):
    words = code_strings_and_names(ast.parse(path.read_text()))
    assert "StackConfig" not in words, (
        f"{path.relative_to(COMPONENTS)} takes the whole stack config; give it the "
        "sections or derived facts it reads")


def dataclass_options(node: ast.ClassDef) -> "dict | None":
    """The keyword options of the class's @dataclass(...) decorator; None if it has none."""
    for decorator in node.decorator_list:
        if isinstance(decorator, ast.Name) and decorator.id == "dataclass":
            return {}
        if isinstance(decorator, ast.Call) and getattr(decorator.func, "id", "") == "dataclass":
            return {k.arg: getattr(k.value, "value", None) for k in decorator.keywords}
    return None


def args_and_results() -> list[tuple[Path, ast.ClassDef]]:
    """A component's `*Args`, and what a layout hands the cluster (contract.py)."""
    found = []
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and dataclass_options(node) is not None and (
                    node.name.endswith("Args") or path.name == "contract.py"):
                found.append((path, node))
    return found


def test_args_and_layout_results_are_frozen_and_keyword_only():
    found = args_and_results()
    assert len([n for _, n in found if n.name.endswith("Args")]) >= 20
    loose = [f"{path.relative_to(COMPONENTS)} {node.name}" for path, node in found
             if dataclass_options(node) != {"frozen": True, "kw_only": True}]
    assert not loose, f"not @dataclass(frozen=True, kw_only=True): {loose}"


# The host steps' way in: what they read of the config travels as one value
# (steps.HostSettings), so a step that reads a new section never touches the callers.
STEP_ENTRIES = {"preparation_steps", "HostBootstrapArgs"}


def test_the_host_steps_callers_pass_their_settings_whole():
    from config.model import StackConfig

    sections = set(StackConfig.model_fields)
    passed = []
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") in STEP_ENTRIES:
                # `packages=settings.packages`: a section handed on by name.
                passed += [f"{path.relative_to(COMPONENTS)}: {node.func.id}({k.arg}=...)"
                           for k in node.keywords if k.arg in sections
                           and getattr(k.value, "attr", None) == k.arg]
    assert not passed, ("config sections passed to the host steps one by one; give them "
                        f"steps.HostSettings instead: {passed}")
