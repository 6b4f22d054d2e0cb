"""The program's "now", for what depends on the date (certificate renewal rounds, the
VPN's revocation list): the system clock, or the moment a caller pins (the offline
preview pins it with its seed, tests pin the days they check)."""

import contextlib
import datetime
from typing import Callable, Iterator

_source: Callable[[], datetime.datetime] = (
    lambda: datetime.datetime.now(datetime.timezone.utc))


def now() -> datetime.datetime:
    return _source()


@contextlib.contextmanager
def using(source: Callable[[], datetime.datetime]) -> Iterator[None]:
    global _source
    earlier, _source = _source, source
    try:
        yield
    finally:
        _source = earlier
