"""The generated config reference (docs/config-reference.md) and Pulumi.yaml's `config:`
block are what `python -m config.reference` writes from the model, and every field of the
model has a description to write."""

import re
import shutil
import typing

import pytest
from markdown_it import MarkdownIt
from pydantic import BaseModel

from config import reference
from config.model import StackConfig
from config.reference_tables import named_types_used, tables
from tests.builders import PROJECT_DIR
from tests.docs import section


def _models(annotation) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation)
            if not isinstance(arg, (str, int, bool)) for m in _models(arg)]


def _fields(model: type[BaseModel], prefix: str = ""):
    """(key, field) of every field StackConfig reaches, sections and lists of them too."""
    for field in model.model_fields.values():
        key = f"{prefix}{field.alias}"
        yield key, field
        for inner in _models(field.annotation):
            yield from _fields(inner, f"{key}.")


@pytest.mark.parametrize("path", [reference.REFERENCE, reference.PROJECT])
def test_the_committed_file_is_what_the_generator_writes(path):
    expected = reference.generated()[path]
    committed = (PROJECT_DIR / path).read_text()
    assert committed == expected, (
        f"{path} is stale: run `python -m config.reference` (make docs) and commit it")


def test_every_field_has_a_description():
    missing = sorted({key for key, field in _fields(StackConfig)
                      if not (field.description or "").strip()})
    assert missing == [], f"fields without a docstring (their description): {missing}"


def test_every_key_of_the_model_has_a_row():
    rows = set(re.findall(r"^\| `([^`]+)` \|", (PROJECT_DIR / reference.REFERENCE).read_text(),
                          re.M))
    keys = {key for table in tables() for key, *_ in table.rows}
    assert len(keys) > 250 and keys <= rows, keys - rows


def test_the_page_parses_as_one_row_of_four_cells_per_key():
    """A `|` in a pattern or a description would split a row: read the page as GitHub does
    (markdown-it-py, CommonMark with GFM tables)."""
    rows, row = [], None
    for token in MarkdownIt("commonmark").enable("table").parse(reference.reference()):
        if token.type == "tr_open":
            row = []
        elif token.type == "inline" and row is not None:
            row.append(token.content)
        elif token.type == "tr_close":
            rows.append(row)
            row = None
    # GFM drops a row's cells beyond the header's: compare each cell with what it must say.
    body = [row for row in rows if row not in (["key", "type", "default", "description"],
                                               ["type", "base", "module", "checked by"])]
    expected = [[f"`{key}`", kind, default, description]
                for table in tables() for key, kind, default, description in table.rows]
    expected += [[f"`{name}`", base, f"`{module}`", check]
                 for name, base, module, check in named_types_used()]
    assert len(body) == len(expected) > 300
    for got, want in zip(body, expected):
        assert got == want


def test_the_check_names_the_stale_file_and_the_write_mends_it(tmp_path, capsys):
    (tmp_path / "docs").mkdir()
    shutil.copy(PROJECT_DIR / reference.PROJECT, tmp_path / reference.PROJECT)
    assert reference.main(["--root", str(tmp_path)]) == 0
    assert reference.main(["--check", "--root", str(tmp_path)]) == 0
    page = tmp_path / reference.REFERENCE
    page.write_text(page.read_text().replace("Pod network;", "Pod networks;"))
    assert reference.main(["--check", "--root", str(tmp_path)]) == 1
    assert capsys.readouterr().err == (f"{reference.REFERENCE} is stale: run `python -m "
                                       "config.reference` (make docs) and commit it\n")
    assert reference.main(["--root", str(tmp_path)]) == 0
    assert page.read_text() == reference.generated()[reference.REFERENCE]
    assert reference.main(["--check", "--root", str(tmp_path)]) == 0


def test_types_defaults_and_secrets_come_from_the_model():
    rows = {key: (kind, default) for table in tables() for key, kind, default, _ in table.rows}
    assert rows["layout"] == ("`bare-metal`, `hybrid` or `cloud`", "required")
    assert rows["clusterName"][1] == "the stack name"
    assert rows["hosts"][0] == "list[[Host](#hosts)]"
    assert rows["network.podCidr"] == ("IPv4Cidr", "`10.244.0.0/16`")
    assert rows["network.mtu"] == ("int (≥ 0, ≤ 9000)", "`0`")
    assert rows["sshPrivateKey"][0].startswith("**secret**")
    assert rows["storage.nfs.mountOptions"][1].startswith("`[nfsvers=4.1, ")
    assert rows["ssh.bastion.user"][1] == "unset"


def test_every_stack_output_is_described():
    """The outputs table (docs/running.md) names exactly what __main__.py exports:
    Cluster.outputs, whose names are components/cluster.py OUTPUTS."""
    from components.cluster import OUTPUTS

    exported = set(OUTPUTS)
    assert "for name, value in cluster.outputs.items():" in (
        PROJECT_DIR / "__main__.py").read_text()
    text = section("docs/running.md", "Stack outputs")
    table = text.split("\n\n", 2)[1]
    described = set(re.findall(r"^\| `([A-Za-z]+)` \|", table, re.M))
    assert exported and described == exported, described ^ exported


def test_the_readme_names_the_python_and_pulumi_versions_the_workflows_use():
    workflows = "".join(p.read_text() for p in (PROJECT_DIR / ".github/workflows").glob("*.yml"))
    clis = set(re.findall(r"pulumi-version: ([0-9.]+)", workflows))
    pythons = set(re.findall(r'python-version: "([0-9.]+)"', workflows))
    sdk = re.search(r"^pulumi==([0-9.]+)$", (PROJECT_DIR / "requirements.txt").read_text(), re.M)
    top = (PROJECT_DIR / "README.md").read_text().split("## What it is", 1)[0]
    assert len(clis) == 1 and len(pythons) == 1, (clis, pythons)
    assert clis == {sdk[1]}
    assert f"Pulumi CLI {sdk[1]}" in top and f"Python {pythons.pop()}" in top
