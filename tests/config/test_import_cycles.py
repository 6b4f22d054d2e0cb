"""No module imports itself through others: config/ has no cycle at all, and the rest of the
project none beyond those the other parts of its restructuring remove (tests/imports.py
reads every import statement, TYPE_CHECKING and function-level ones too)."""

from tests.imports import PROJECT, describe, import_cycles, import_graph

# Every top-level package of the program and its tools, and __main__.py.
PACKAGES = sorted(path.name for path in PROJECT.iterdir()
                  if (path / "__init__.py").is_file() or path.name == "__main__.py")
# Cycles outside config/ that are taken out elsewhere: the layouts (components/layouts/)
# and the day-2 tools' checks registry. Nothing may join them, and no new cycle may appear.
KNOWN = [
    ["components.aws_layouts", "components.layouts"],
    ["doctor.checks", "doctor.checks.drift", "doctor.checks.gpus", "doctor.checks.hosts",
     "doctor.checks.namespaces", "doctor.checks.nodes", "doctor.checks.storage",
     "doctor.checks.tokens", "doctor.checks.workloads"],
]


def test_config_has_no_import_cycle():
    cycles = import_cycles(import_graph(["config"]))
    assert not cycles, f"config/ modules import each other: {describe(cycles)}"


def test_the_project_has_no_new_import_cycle():
    assert "config" in PACKAGES and "components" in PACKAGES
    cycles = [cycle for cycle in import_cycles(import_graph(PACKAGES)) if cycle not in KNOWN]
    assert not cycles, f"modules import each other: {describe(cycles)}"


def test_a_cycle_is_found_wherever_its_imports_are(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from typing import TYPE_CHECKING\n"
                                  "if TYPE_CHECKING:\n    from pkg.b import B\n")
    (package / "b.py").write_text("def f():\n    from . import c\n")
    (package / "c.py").write_text("import pkg.a\n")
    (package / "d.py").write_text("from pkg import a\n")
    graph = import_graph(["pkg"], root=tmp_path)
    assert import_cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]
    assert graph["pkg.d"] == {"pkg.a"}
