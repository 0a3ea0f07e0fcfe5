"""lock_first on SQLite for real."""

from memory.core.locking import lock_first
from memory.models import Memory
from tests.ids import key


def test_lock_first_returns_the_row_or_none(thread):
    mid = thread.add_memory("locked row")
    assert lock_first(Memory.objects.filter(pk=key(mid))).content == "locked row"
    assert lock_first(Memory.objects.filter(pk=key("nope"))) is None
