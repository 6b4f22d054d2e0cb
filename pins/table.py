"""config/versions.py's IMAGE_DIGESTS table, rewritten between its marker lines only.

The table is Python in the one file of pins; only its lines of the form
`    "repository:tag": "sha256:...",` are the tool's to add or change. Comments and every
other line stay as they are, so each digest keeps the note of where it came from."""

import re
from pathlib import Path

START = "    # --- pins: digests ---"
END = "    # --- end of pins ---"
_LINE = re.compile(r'    "(?P<image>[^"]+)": "(?P<digest>sha256:[0-9a-f]{64})",')


def read(path: Path) -> dict[str, str]:
    """The table's digests by repository:tag."""
    return {m["image"]: m["digest"] for m in map(_LINE.fullmatch, _block(path)[1]) if m}


def write(path: Path, digests: dict[str, str], note: str) -> None:
    """Set `digests` in the table: a changed digest in place, a new one at its end
    under the comment `note`."""
    before, lines, after = _block(path)
    left = dict(digests)
    for index, line in enumerate(lines):
        match = _LINE.fullmatch(line)
        if match and match["image"] in left:
            lines[index] = _entry(match["image"], left.pop(match["image"]))
    if left:
        lines.append(f"    # {note}")
        lines.extend(_entry(image, digest) for image, digest in sorted(left.items()))
    path.write_text("\n".join([*before, START, *lines, END, *after]) + "\n")


def _entry(image: str, digest: str) -> str:
    return f'    "{image}": "{digest}",'


def _block(path: Path) -> tuple[list[str], list[str], list[str]]:
    text = path.read_text().splitlines()
    if text.count(START) != 1 or text.count(END) != 1 or text.index(START) > text.index(END):
        raise SystemExit(f"{path}: the IMAGE_DIGESTS table's marker lines {START.strip()!r} "
                         f"and {END.strip()!r} are not there once each, in that order")
    start, end = text.index(START), text.index(END)
    return text[:start], text[start + 1:end], text[end + 1:]
