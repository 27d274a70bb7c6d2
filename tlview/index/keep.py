"""Which payload texts reading keeps in memory, within a budget over the whole log."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class Keep:
    """Which payload texts to keep in memory: everything else is hashed, measured and dropped.

    Texts are kept in log order while the budget has room for each whole (up to
    `payload_bytes`); the first that does not fit ends the keeping. So the texts kept are a
    prefix of the log's payloads, and the readers of one log's parts can agree on the texts one
    reader keeps (`join`)."""

    payload_bytes: int = 0  # text kept per payload (0: none but what the index itself reads)
    total_bytes: int = 0  # budget over the whole log
    kinds: frozenset[str] | None = None  # payload kinds to keep (None: all)
    compile: str | None = None  # keep only for this compile id
    ranks: bool = True  # also keep what comparing ranks needs (masked graph hashes)
    exact: bool = False  # keep the payloads' exact bytes whole (`data`), not their text
    line: int | None = None  # with `exact`: only the payload of the record at this line
    lines: frozenset[int] = frozenset()  # with `exact`: also the payloads at these lines
    check: bool = False  # check the md5 of every payload it wants, its text kept or not
    used: int = 0
    full: bool = False  # a text did not fit: no more are kept
    kept: list[tuple[int, int]] = field(default_factory=list)  # (line, bytes), in log order

    def fresh(self) -> Keep:
        """The same policy with its budget unspent, so every log gets the whole budget."""
        return Keep(
            self.payload_bytes,
            self.total_bytes,
            self.kinds,
            self.compile,
            self.ranks,
            self.exact,
            self.line,
            lines=self.lines,
            check=self.check,
        )

    def wants(self, kind: str, compile_key: str) -> bool:
        """Whether payloads of this kind and compile are among those kept."""
        return (self.kinds is None or kind in self.kinds) and (
            self.compile is None or compile_key == self.compile
        )

    def checks(self, kind: str, compile_key: str) -> bool:
        """Whether a payload's md5 is checked because a renderer may show it (or was asked)."""
        return (self.payload_bytes > 0 or self.check) and self.wants(kind, compile_key)

    def wants_data(self, kind: str, compile_key: str, line: int) -> bool:
        """Whether to keep this payload's exact bytes: `tlview show` keeps the one it writes."""
        if not (self.exact and self.wants(kind, compile_key)):
            return False
        if self.lines:
            return line in self.lines or line == self.line
        return self.line in (None, line)

    def take(self, kind: str, compile_key: str, size: int, line: int) -> int:
        """Bytes of this payload (of `size` bytes, at `line`) to keep as text."""
        if self.payload_bytes <= 0 or self.full or self.exact:
            return 0
        if not self.wants(kind, compile_key):
            return 0
        n = min(self.payload_bytes, size)
        if self.used + n > self.total_bytes:
            self.full = True
            return 0
        self.used += n
        self.kept.append((line, n))
        return self.payload_bytes

    def join(self, later: Keep, lines: int) -> set[int]:
        """Take in the texts the reader of the part after this one kept (with a budget of its
        own, its lines numbered from its start): the lines, `lines` on, of those one reader of
        both parts would not have kept. This Keep is then one reader's of both."""
        room = self.total_bytes - self.used
        for k, (line, n) in enumerate(later.kept):
            if self.full or n > room:
                self.full = True
                return {x + lines for x, _ in later.kept[k:]}
            room -= n
            self.used += n
            self.kept.append((line + lines, n))
        self.full = self.full or later.full
        return set()
