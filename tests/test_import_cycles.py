"""No module imports itself through others, anywhere in the program and its tools
(tests/imports.py reads every import statement, TYPE_CHECKING and function-level ones
too)."""

from tests.imports import PROJECT, describe, import_cycles, import_graph

# Every top-level package of the program and its tools, and __main__.py.
PACKAGES = sorted(path.name for path in PROJECT.iterdir()
                  if (path / "__init__.py").is_file() or path.name == "__main__.py")


def test_the_graph_covers_the_program_and_the_tools():
    graph = import_graph(PACKAGES)
    for name in ("__main__", "components.cluster", "components.layouts.contract",
                 "config.model", "doctor.checks.every", "validate.__main__",
                 "contract.outputs", "cli.__main__", "policy.rules", "preview.engine",
                 "pins.table", "acceptance.nccl_results"):
        assert name in graph, name
    assert "components.layouts.contract" in graph["components.layouts.cloud"]


def test_no_import_cycle():
    cycles = import_cycles(import_graph(PACKAGES))
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
