"""PyYAML's parse errors as a newcomer can act on: what is wrong in the stack file's own
words, at the line where the mistake is, instead of the parser's tokens."""

import yaml

# PyYAML's messages (yaml/scanner.py and yaml/parser.py, PyYAML 6.0): the few a hand-written
# stack file hits, and what each means there.
_MAPPING_VALUE = "mapping values are not allowed here"
_NO_COLON = "could not find expected ':'"
_BLOCK_END = "expected <block end>"
_TAB = "found character '\\t' that cannot start any token"
_FLOW = "while parsing a flow "


def _where(mark) -> str:
    # PyYAML's marks count from 0; editors count from 1.
    return f"line {mark.line + 1}, column {mark.column + 1}"


def describe(error: yaml.MarkedYAMLError, text: str) -> str:
    """`line L, column C: not valid YAML: <what to do>` for `error` in `text`."""
    problem, context = error.problem or "", error.context or ""
    mark, context_mark = error.problem_mark, error.context_mark
    lines = text.splitlines()

    def line_of(at) -> str:
        return lines[at.line].strip() if at is not None and at.line < len(lines) else ""

    if problem == _NO_COLON and context_mark is not None:
        # PyYAML stops on the line after the one without ": ".
        return (f"{_where(context_mark)}: not valid YAML: `{line_of(context_mark)}` is not "
                "`key: value`: put a space after the colon, or quote the text")
    if problem.startswith(_TAB):
        return f"{_where(mark)}: not valid YAML: a tab; indent with spaces only"
    if problem.startswith(_BLOCK_END) and context_mark is not None:
        return (f"{_where(mark)}: not valid YAML: `{line_of(mark)}` is indented by "
                f"{mark.column} spaces, which matches no key above it: indent it like the "
                "keys beside it (or like its parent's, to end the section)")
    if problem == _MAPPING_VALUE:
        return (f"{_where(mark)}: not valid YAML: `{line_of(mark)}` is indented deeper than "
                "the key above it (indent it like that key), or its value holds \": \" "
                "(quote the value)")
    if context.startswith(_FLOW) and context_mark is not None:
        opening = "[" if "sequence" in context else "{"
        closing = "]" if opening == "[" else "}"
        return (f"{_where(context_mark)}: not valid YAML: this `{opening}` is not closed by "
                f"`{closing}`")
    what = problem or context or "cannot be parsed"
    if context and problem and context_mark is not None:
        what += f" ({context} at {_where(context_mark)})"
    return f"{_where(mark or context_mark)}: not valid YAML: {what}"
