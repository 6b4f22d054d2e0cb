"""The comment and indentation stripping that keeps boot user data under EC2's 16 KiB
changes nothing bash runs: bash's own parser (`bash --pretty-print`, bash 5.1 and later)
prints the same commands for every script before and after."""

import shutil
import subprocess
from pathlib import Path

import pytest

from components.common.bundle import SCRIPTS_DIR
from components.common.shell_text import without_comment_lines

SCRIPTS = sorted(p for p in SCRIPTS_DIR.parent.rglob("*.sh"))


def parsed(text: str) -> list[str]:
    """The commands bash parses from `text`, as it prints them (comments become blank
    lines at the top level, which are dropped)."""
    bash = shutil.which("bash")
    result = subprocess.run([bash, "--pretty-print"], input=text, capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    return [line for line in result.stdout.splitlines() if line.strip()]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(SCRIPTS_DIR.parent)))
def test_bash_runs_the_same_commands(script: Path):
    text = script.read_text()
    compact = without_comment_lines(text)
    assert len(compact) < len(text)
    assert parsed(compact) == parsed(text)


def test_here_documents_and_strings_spanning_lines_are_kept_whole():
    text = (
        "f() {\n"
        "  # a comment\n"
        "  write_file /etc/x 0644 <<'EOF'\n"
        "# Managed by gpu-cluster: this line is content\n"
        "    indented content\n"
        "EOF\n"
        "  local message='first line\n"
        "  # not a comment: inside the quotes\n"
        "  last line'\n"
        "  echo \"<<NOT_A_HEREDOC\" # trailing comment stays\n"
        "}\n"
    )
    compact = without_comment_lines(text)
    assert compact == (
        "f() {\n"
        "write_file /etc/x 0644 <<'EOF'\n"
        "# Managed by gpu-cluster: this line is content\n"
        "    indented content\n"
        "EOF\n"
        "local message='first line\n"
        "  # not a comment: inside the quotes\n"
        "  last line'\n"
        "echo \"<<NOT_A_HEREDOC\" # trailing comment stays\n"
        "}\n"
    )
    assert parsed(compact) == parsed(text)
