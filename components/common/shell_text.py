"""Script text made smaller without changing what bash or python3 runs: for cloud-init
user data, which EC2 limits to 16 KiB even gzipped. Comments are most of the scripts'
size; the files under components/scripts/ stay the ones to read."""

import ast
import re

# `<<WORD`, `<<-WORD`, `<<'WORD'`, `<<"WORD"` (not `<<<`, a here-string).
_HEREDOC = re.compile(r"(?<!<)<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1(?!<)")


def without_comment_lines(script: str) -> str:
    """`script` without its comment-only lines and indentation. Lines inside a
    here-document or a quoted string that spans lines are kept as they are. The tests check, for every script, that
    bash parses the result to the same commands (`bash --pretty-print`)."""
    kept, heredocs, quote = [], [], ""
    for line in script.splitlines():
        if heredocs:
            kept.append(line)
            if line.lstrip("\t") == heredocs[0]:
                heredocs.pop(0)
            continue
        if not quote and line.lstrip().startswith("#") and not line.startswith("#!"):
            continue
        # Indentation outside strings and here-documents is for readers of the files.
        kept.append(line if quote else line.lstrip(" "))
        quote = _open_quote_after(line, quote)
        if not quote:
            code = _code_of(line)
            heredocs += [match.group(2) for match in _HEREDOC.finditer(line)
                         if code[match.start():match.start() + 2] == "<<"]
    return "\n".join(kept) + ("\n" if script.endswith("\n") else "")


def _open_quote_after(line: str, quote: str) -> str:
    """The quote (' or ") still open at the end of `line`, given the one open before it."""
    index = 0
    while index < len(line):
        char = line[index]
        if quote == "'":
            if char == "'":
                quote = ""
        elif quote == '"':
            if char == "\\":
                index += 1
            elif char == '"':
                quote = ""
        elif char == "\\":
            index += 1
        elif char == "#" and (index == 0 or line[index - 1] in " \t;|&("):
            break  # a comment to the end of the line
        elif char in "'\"":
            quote = char
        index += 1
    return quote


def _code_of(line: str) -> str:
    """`line` with its quoted parts blanked, so a `<<` inside quotes is no here-document."""
    out, quote, index = [], "", 0
    while index < len(line):
        char = line[index]
        if quote:
            if char == "\\" and quote == '"':
                index += 1
            elif char == quote:
                quote = ""
            out.append(" ")
        elif char == "\\":
            out.append("  ")
            index += 1
        elif char == "#" and (index == 0 or line[index - 1] in " \t;|&("):
            break
        elif char in "'\"":
            quote = char
            out.append(" ")
        else:
            out.append(char)
        index += 1
    return "".join(out)


def python_without_docs(program: str) -> str:
    """`program` without comments and docstrings, but for the first paragraph of the
    module's docstring (the usage a program prints). The tests run the result against
    the same servers as the file."""
    tree = ast.parse(program)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) \
                and ast.get_docstring(node, clean=False) is not None:
            if isinstance(node, ast.Module):
                node.body[0].value.value = node.body[0].value.value.split("\n\n")[0]
            else:
                node.body = node.body[1:] or [ast.Pass()]
    return ast.unparse(tree) + "\n"
