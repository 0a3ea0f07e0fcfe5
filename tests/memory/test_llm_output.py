"""A model's prose is checked before it is stored (issue #34): ``memory.llm.replies.generated_text_fault`` and
``memory.llm.adapters.checked_text``, applied to image captions and thread summaries."""

import pytest

from memory.client import AgentMemory, MemoryExtractionConfig
from memory.llm.adapters import LlmBadText, checked_text
from memory.llm.prompts import CAPTION_SYSTEM_PROMPT, SUMMARY_SYSTEM_PROMPT
from memory.llm.replies import generated_text_fault
from memory.llm.scripted import ScriptedLlm
from memory.models import Image, SearchChunk, ThreadSummary
from tests import image_samples as samples


@pytest.mark.parametrize("text", [
    "A red square on a white background.",
    "Two people hold a sign that reads \"OPEN 24/7\"; the photo IMG_2034 was taken at 9:30 pm.",
    "一只猫坐在窗台上，外面在下雨。",
    "Screenshot: the login page, with the e-mail field highlighted (error 404).",
    "Kate's cooking class, 3 plates of pasta -- and a tiramisu!",
])
def test_prose_in_any_script_passes(text):
    assert generated_text_fault(text, max_chars=500, prompts=(CAPTION_SYSTEM_PROMPT,)) is None


@pytest.mark.parametrize(("text", "reason"), [
    ("", "empty"),
    ("   \n ", "empty"),
    ("word " * 200, "too long"),
    ("A cat\x00\x01 on a mat", "not printable text"),
    ("A cat \ufffd\ufffd on a mat", "not printable text"),
    ('{"error": {"message": "model overloaded", "type": "server_error"}}', "an error body"),
    ("<!DOCTYPE html><html><body>502 Bad Gateway</body></html>", "an error body"),
    ("You describe images for a searchable memory store. Write one or two plain sentences", "an echo of the prompt"),
    ("Describe this image.", "an echo of the prompt"),
    ("x#9@!kq0 %%^&*( ]]]] 0x7f3a:: =+=+ ~~ qZ3$$", "not words"),
    ("aGVsbG8gd29ybGQgdGhpcyBpcyBiYXNlNjQ= dGhpcyBpcyBhbHNvIGJhc2U2NA==", "not words"),
])
def test_garbage_is_refused_with_its_reason(text, reason):
    prompts = (CAPTION_SYSTEM_PROMPT, "Describe this image.")
    assert generated_text_fault(text, max_chars=500, prompts=prompts) == reason
    with pytest.raises(LlmBadText, match=f"caption was refused: {reason}") as caught:
        checked_text(text, what="caption", max_chars=500, prompts=prompts)
    assert (caught.value.what, caught.value.reason) == ("caption", reason)


def test_a_summary_may_repeat_the_messages_but_not_its_instructions():
    assert checked_text("  Ana loves green tea and lives in Lisbon. ", what="summary", max_chars=500,
                        prompts=(SUMMARY_SYSTEM_PROMPT,)) == "Ana loves green tea and lives in Lisbon."
    with pytest.raises(LlmBadText, match="echo"):
        checked_text(SUMMARY_SYSTEM_PROMPT, what="summary", max_chars=5000, prompts=(SUMMARY_SYSTEM_PROMPT,))


@pytest.fixture
def client(db):
    return AgentMemory(llm=None)


def test_a_garbage_caption_stores_no_image_and_an_update_keeps_the_old_description(client):
    llm = ScriptedLlm(["x#9@!kq0 %%^&*( ]]]] 0x7f3a:: =+=+", "a red square", '{"error": "overloaded"}'])
    thread = client.create_thread(thread_id="t-cap", user_id="u", agent_id="a", llm=llm,
                                  memory_extraction_config=MemoryExtractionConfig(extract_memories=False))
    with pytest.raises(LlmBadText, match="not words"):
        thread.add_image(samples.png())
    assert Image.objects.count() == 0 and not SearchChunk.objects.filter(source_kind="image").exists()
    image_id = thread.add_image(samples.png())
    with pytest.raises(LlmBadText, match="an error body"):
        thread.update_image(image_id, description=None)
    assert thread.list_images()[0].description == "a red square"


def test_a_garbage_summary_is_a_failed_refresh_and_the_stored_summary_stays(client):
    from memory.context.summaries import summary_refresh

    thread = client.create_thread(thread_id="t-sum", user_id="u", agent_id="a",
                                  memory_extraction_config=MemoryExtractionConfig(extract_memories=False))
    thread.add_messages([{"role": "user", "content": "I love green tea."}])
    good = ScriptedLlm([{"summary": "The user loves green tea.", "topics": ["tea"]}])
    row = summary_refresh(thread=thread.row, llm=good)
    assert row.content == "The user loves green tea."
    thread.add_messages([{"role": "user", "content": "I live in Lisbon."}])
    bad = ScriptedLlm([{"summary": "\x00\x00\x00", "topics": []}])
    with pytest.raises(LlmBadText, match="summary was refused: not printable text"):
        summary_refresh(thread=thread.row, llm=bad)
    assert ThreadSummary.objects.get(thread_id=thread.row.pk).content == "The user loves green tea."
