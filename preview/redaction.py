"""Hiding the secrets a plan knows in the text it shows, in time linear in the text
whatever the number of secrets (a large stack knows hundreds: a token per worker).

Most of that text is the same lines over and over (every step's stdin carries the
script libraries), so text is read a line at a time and each distinct line is searched
once; the few secrets that span lines (keys, certificates, kubeconfigs) are searched for
in the whole text."""

import re
from typing import Iterable, Optional

from contract.names import REDACTED

__all__ = ["REDACTED", "Redactor"]
# Shorter strings would hide ordinary words along with them.
MIN_SECRET_LENGTH = 6
# How much of a secret the pattern holds (all of it would make compiling it take as long
# as the rest of the preview's writing).
_PREFIX = 16


class Redactor:
    """Every stretch of text that secrets cover becomes [secret] once: a secret inside a
    longer one, or two that overlap, leave nothing of either."""

    def __init__(self, secrets: Iterable[str]):
        words = sorted({s for s in secrets if len(s) >= MIN_SECRET_LENGTH})
        self._multiline = [word for word in words if "\n" in word]
        # One-line secrets by their first characters, the longest first: where one of
        # these prefixes starts, the secrets that begin with it are compared whole.
        by_prefix: dict[str, list[str]] = {}
        for word in words:
            if "\n" not in word:
                by_prefix.setdefault(word[:_PREFIX], []).append(word)
        lengths = sorted({len(prefix) for prefix in by_prefix})
        self._candidates = {
            prefix: sorted((word for length in lengths if length <= len(prefix)
                            for word in by_prefix.get(prefix[:length], ())), key=len, reverse=True)
            for prefix in by_prefix}
        # At each position the longest prefix that starts there (a zero-width match, so
        # overlapping secrets are all found): one pattern, the prefixes as a trie.
        self._starts = (re.compile(f"(?=({_pattern(_trie(sorted(by_prefix)))}))")
                        if by_prefix else None)
        self._line_spans: dict[str, tuple[tuple[int, int], ...]] = {}
        # Text already read -> its redaction, None when it holds no secret (by value: an
        # equal string may be another object).
        self._done: dict[str, Optional[str]] = {}

    def holds_secret(self, text: str) -> bool:
        return self._redacted(text) is not None

    def redact(self, text: str) -> str:
        """`text` with its secrets hidden."""
        found = self._redacted(text)
        return text if found is None else found

    def _redacted(self, text: str) -> Optional[str]:
        # A step's stdin is shown more than once (plan.json, its host script, VPN configs).
        if text not in self._done:
            self._done[text] = self._redact(text)
        return self._done[text]

    def _redact(self, text: str) -> Optional[str]:
        spans = []
        offset = 0
        for line in text.split("\n"):
            in_line = self._line_spans.get(line)
            if in_line is None:
                in_line = self._line_spans[line] = self._spans_in_line(line)
            if in_line:
                spans += [(offset + start, offset + end) for start, end in in_line]
            offset += len(line) + 1
        for secret in self._multiline:
            start = text.find(secret)
            while start >= 0:
                spans.append((start, start + len(secret)))
                start = text.find(secret, start + 1)
        if not spans:
            return None
        spans.sort()
        parts, done = [], 0
        start, end = spans[0]
        for next_start, next_end in spans[1:]:
            if next_start < end:
                end = max(end, next_end)
                continue
            parts += [text[done:start], REDACTED]
            done, start, end = end, next_start, next_end
        parts += [text[done:start], REDACTED, text[end:]]
        return "".join(parts)

    def _spans_in_line(self, line: str) -> tuple[tuple[int, int], ...]:
        if self._starts is None or len(line) < MIN_SECRET_LENGTH:
            return ()
        spans = []
        for match in self._starts.finditer(line):
            start = match.start()
            word = next((word for word in self._candidates[match[1]]
                         if line.startswith(word, start)), None)
            if word is not None:
                spans.append((start, start + len(word)))
        return tuple(spans)


_END = ""  # the key that marks where a secret ends in the trie


def _trie(words: list[str]) -> dict:
    root: dict = {}
    for word in words:
        node = root
        for char in word:
            node = node.setdefault(char, {})
        node[_END] = {}
    return root


def _pattern(node: dict) -> str:
    """The regular expression of the secrets below `node`, the longest first; a chain of
    single characters is one literal, so recursion goes only as deep as the trie branches."""
    branches = []
    for char, child in sorted(node.items()):
        if char == _END:
            continue
        literal = [char]
        while len(child) == 1 and _END not in child:
            [(char, child)] = child.items()
            literal.append(char)
        branches.append(re.escape("".join(literal)) + _pattern(child))
    if not branches:
        return ""
    alternatives = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    if _END in node:
        # Greedy: the longer secret if it matches, else the one that ends here.
        return "(?:" + alternatives + ")?" if len(branches) == 1 else alternatives + "?"
    return alternatives
