"""`python -m preview STACK`: a stack's name or its file, a misspelt name answered with the
nearest stack, never `Pulumi.Pulumi.towers.yaml.yaml`."""

import pytest

from preview import stack_file
from preview.stack_file import StackFileError, read_stack
from tests.preview.test_stack_files import CLIENT_TO_EXISTING, project, run_preview


@pytest.fixture
def towers(tmp_path, monkeypatch):
    folder = project(tmp_path, CLIENT_TO_EXISTING)
    (folder / "Pulumi.test.yaml").rename(folder / "Pulumi.towers.yaml")
    monkeypatch.chdir(folder)
    return folder


@pytest.mark.parametrize("argument", ["towers", "Pulumi.towers.yaml", "./Pulumi.towers.yaml",
                                      "Pulumi.towers.yml"])
def test_a_stack_is_named_by_its_name_or_its_file(towers, argument):
    assert stack_file.stack_name(argument, towers) == "towers"


def test_a_stack_file_by_its_absolute_path_in_the_project(towers):
    assert stack_file.stack_name(str(towers / "Pulumi.towers.yaml"), towers) == "towers"


def test_a_stack_file_elsewhere_is_explained(towers, tmp_path):
    with pytest.raises(StackFileError) as error:
        stack_file.stack_name(str(tmp_path / "Pulumi.towers.yaml"), towers)
    assert str(error.value) == (f"{tmp_path / 'Pulumi.towers.yaml'}: Pulumi reads a stack's "
                                f"file from the project folder {towers} only; move it there "
                                "and give its name (towers)")


def test_a_misspelt_stack_is_answered_with_the_nearest_one(towers):
    with pytest.raises(FileNotFoundError) as error:
        read_stack(towers, "towr")
    assert str(error.value) == f"no stack file Pulumi.towr.yaml in {towers}; did you mean 'towers'?"


def test_an_unknown_stack_lists_the_stacks(towers):
    with pytest.raises(FileNotFoundError) as error:
        read_stack(towers, "zzz")
    assert str(error.value).endswith("(stacks here: towers)")


def test_the_preview_takes_the_stack_file_s_name(tmp_path):
    folder = project(tmp_path, CLIENT_TO_EXISTING)
    result = run_preview(folder, tmp_path, "Pulumi.test.yaml")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "build" / "test" / "plan.txt").exists()
    assert not (tmp_path / "build" / "Pulumi.test.yaml").exists()
    misspelt = run_preview(folder, tmp_path, "tset")
    assert (misspelt.returncode, misspelt.stderr) == (
        2, f"error: no stack file Pulumi.tset.yaml in {folder}; did you mean 'test'?\n")
