"""Text that cannot be stored or embedded (lone UTF-16 surrogates) is a ValueError naming the field.

Python strings may hold ``"\\ud800"``; UTF-8 databases cannot store it and the
tokenizer refused it with a bare TypeError. ``memory.core.errors.check_text`` now
refuses it during validation, before anything is written.
"""

import pytest

from memory.core.types import TextContent
from memory.models import Memory, Message, Thread
from tests.ids import key

LONE = "a\ud800b"


def counts():
    return Thread.objects.count(), Message.objects.count(), Memory.objects.count()


@pytest.mark.parametrize("call, field", [
    (lambda c, t: t.add_messages([{"role": "user", "content": "fine"}, {"role": "user", "content": LONE}]),
     "messages[1].content"),
    (lambda c, t: t.add_messages([{"role": "user", "content": [TextContent(text=LONE)]}]),
     "messages[0].content[0].text"),
    (lambda c, t: t.add_messages([{"role": "user", "content": [{"type": "text", "text": LONE}]}]),
     "messages[0].content[0].text"),
    (lambda c, t: t.add_messages([{"role": LONE, "content": "x"}]), "messages[0].role"),
    (lambda c, t: t.add_memory(LONE), "content"),
    (lambda c, t: t.add_memory("ok", memory_id=LONE), "memory_id"),
    (lambda c, t: t.search(LONE), "query"),
    (lambda c, t: c.search(LONE, user_id="user-1"), "query"),
    (lambda c, t: c.create_thread(thread_id=LONE), "thread_id"),
    (lambda c, t: c.create_thread(user_id=LONE), "user_id"),
])
def test_lone_surrogates_are_refused_naming_the_field_and_nothing_is_written(client, thread, call, field):
    before = counts()
    with pytest.raises(ValueError) as info:
        call(client, thread)
    assert str(info.value).startswith(f"{field}: is not valid Unicode text")
    assert counts() == before


def test_updates_refuse_them_too_and_keep_what_is_stored(thread):
    (message_id,) = thread.add_messages([{"role": "user", "content": "kept"}])
    memory_id = thread.add_memory("kept memory")
    with pytest.raises(ValueError, match="^content: is not valid Unicode text"):
        thread.update_message(message_id, content=LONE)
    with pytest.raises(ValueError, match="^content: is not valid Unicode text"):
        thread.update_memory(memory_id, content=LONE)
    assert thread.get_message(message_id).content == "kept"
    assert Memory.objects.get(pk=key(memory_id)).content == "kept memory"


def test_valid_astral_characters_are_fine(thread):
    (message_id,) = thread.add_messages([{"role": "user", "content": "I love 🍕"}])
    assert thread.get_message(message_id).content == "I love 🍕"
    assert [r.record.id for r in thread.search("🍕 pizza", max_results=1)] == [message_id]


@pytest.mark.parametrize("bad", ["a\x00b", "a\x1b[31mb", "tab\there", "del\x7f", "c1\x85"])
def test_identifiers_refuse_control_characters_naming_the_field(client, thread, bad):
    """Found by a reviewer: NUL and ESC were accepted in thread, user, memory and profile ids and reached the
    admin's pages as binary. Content may hold them (a message is text a user typed); an identifier may not."""
    before = counts()
    for call, field in ((lambda: client.create_thread(thread_id=bad), "thread_id"),
                        (lambda: client.create_thread(user_id=bad), "user_id"),
                        (lambda: thread.add_memory("ok", memory_id=bad), "memory_id"),
                        (lambda: client.add_user(bad, "info"), "user_id")):
        with pytest.raises(ValueError, match=f"^{field}: must not hold a control character"):
            call()
    assert counts() == before
    if "\x00" in bad:  # NUL is refused everywhere: PostgreSQL's text and jsonb cannot hold it
        for call, field in ((lambda: thread.add_messages([{"role": "user", "content": f"no {bad}"}]), "content"),
                            (lambda: thread.add_memory(f"no {bad}"), "content"),
                            (lambda: thread.add_memory("ok", metadata={"k": bad}), "metadata")):
            with pytest.raises(ValueError, match=f"{field}.*U\\+0000"):
                call()
        assert counts() == before
        return
    (message_id,) = thread.add_messages([{"role": "user", "content": f"content may hold {bad}"}])
    assert thread.get_message(message_id).content == f"content may hold {bad}"
