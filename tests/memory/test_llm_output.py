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
    # from the outside attack: refused before
    "می\u200cخواهم یک گربه روی میز ببینم.",  # Persian with ZWNJ
    "A woman \U0001f469\u200d\U0001f4bb codes at a desk by the window.",  # an emoji joined with ZWJ
    "An extra\u00adordinary sunset over the bay.",  # a soft hyphen
    "\ufeffA red bicycle leaning on a wall.",  # a leading BOM
    "A sign reads \u200fשלום\u200e and Hello.",  # RLM/LRM marks in mixed-direction text
    "P/N 74HC595N, 1N4148, 2N2222A, LM317T on a PCB.",
    "A Mazda MX-5 NA6CE B6ZE 1.6L in a garage.",
    # from the second attack: refused before
    "一只橘猫趴在窗台上，窗外正在下着小雨，玻璃上有很多水珠，远处可以看到模糊的城市高楼和灯光。",
    "แมวสีส้มนอนอยู่บนขอบหน้าต่างขณะที่ฝนตกข้างนอก",
    "Receipt: Coffee $3.50, Bagel $2.25, Tax $0.46, Total $6.21",
    "Slide with the constraint 0 < p < 1 and q > 0 written on a whiteboard.",
    "Screenshot of an HTML editor showing <div class=\"header\"> and <p>Welcome</p>",
    "Error: 404 page on a website with a lost astronaut illustration",
    "A website mockup filled with lorem ipsum placeholder text",
    "I can\u2019t stop smiling \u2014 a mug with this slogan on a desk",
])
def test_prose_in_any_script_passes(text):
    assert generated_text_fault(text, max_chars=500, prompts=(CAPTION_SYSTEM_PROMPT,)) is None


@pytest.mark.parametrize(("text", "reason"), [
    ("", "empty"),
    ("   \n ", "empty"),
    ("word " * 500, "too long"),
    ("A cat\x00\x01 on a mat", "not printable text"),
    ("A cat \ufffd\ufffd on a mat", "not printable text"),
    ('{"error": {"message": "model overloaded", "type": "server_error"}}', "an error body"),
    ("<!DOCTYPE html><html><body>502 Bad Gateway</body></html>", "an error body"),
    ("You describe images for a searchable memory store. Write one or two plain sentences", "an echo of the prompt"),
    ("Describe this image.", "an echo of the prompt"),
    ("x#9@!kq0 %%^&*( ]]]] 0x7f3a:: =+=+ ~~ qZ3$$", "not words"),
    ("aGVsbG8gd29ybGQgdGhpcyBpcyBiYXNlNjQ= dGhpcyBpcyBhbHNvIGJhc2U2NA==", "not words"),
    # from the outside attack: stored before
    ("the " * 300, "repetitive"),
    ("A cat sat on the mat. " * 60, "repetitive"),
    ("a" * 1500, "not words"),
    ("Lorem ipsum dolor sit amet, consectetur adipiscing elit.", "placeholder text"),
    ('[{"error": {"message": "overloaded"}}]', "a JSON value"),
    ('{"code": 503, "msg": "upstream overloaded"}', "an error body"),
    ('{"caption": "a cat"}', "a JSON value"),
    ("I'm sorry, but I can't help with that image.", "a refusal"),
    ("As an AI, I cannot see images.", "a refusal"),
    ("null", "empty"),
    ("undefined", "empty"),
    ("Error: model overloaded", "an error body"),
    ("Traceback (most recent call last):\n  File \"x.py\", line 1", "an error body"),
    ("<p>A cat</p>", "markup"),
    ("<b>A cat</b> on a mat", "markup"),
    ("A c\u0336\u0337\u0338a\u0336\u0337\u0338t\u0336\u0337\u0338 z\u0336\u0337\u0338", "not words"),
    ("A sign that says \u202eevil\u202c here.", "not printable text"),
    # from the second attack: stored before
    ("I\u2019m sorry, but I can\u2019t help with that.", "a refusal"),
    ("I apologize, but I am unable to view images.", "a refusal"),
    ("Unfortunately, I cannot see the image you sent.", "a refusal"),
    ("As a language model, I cannot see pictures.", "a refusal"),
    ("{'error': 'rate limited', 'code': 429}", "an error body"),
    ("502 Bad Gateway", "an error body"),
    ("Internal Server Error", "an error body"),
    ("Request failed with status code 500", "an error body"),
    ("upstream connect error or disconnect/reset before headers", "an error body"),
    ("```json\n{\"caption\": \"a cat\"}\n```", "markup"),
    ('{"caption": "A cat on a m', "a JSON value"),
    ("42", "a JSON value"),
    ("true", "a JSON value"),
    ("A cat on a mat.<|im_end|><|endoftext|>", "markup"),
    ("cat " * 19, "repetitive"),
    ("The image shows " * 5, "repetitive"),
    ("a" * 39, "not words"),
    ("ha" * 20, "not words"),
    ("A small brown dog runs across the green park lawn. " * 4, "repetitive"),
    ("TODO", "empty"),
    ("(none)", "empty"),
    ("undefined undefined", "empty"),
    ("[object Object]", "placeholder text"),
    ("Caption: [insert caption here]", "placeholder text"),
])
def test_garbage_is_refused_with_its_reason(text, reason):
    prompts = (CAPTION_SYSTEM_PROMPT, "Describe this image.")
    assert generated_text_fault(text, max_chars=2000, prompts=prompts) == reason
    with pytest.raises(LlmBadText, match=f"caption was refused: {reason}") as caught:
        checked_text(text, what="caption", max_chars=2000, prompts=prompts)
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


def test_an_llm_error_never_names_the_endpoint_or_its_password():
    """A job's error reaches GET .../extraction and the staff page (any read key of the project): an outside
    attack read the LLM's address there. The endpoint is named as "the LLM endpoint"; a server's own error text
    has its addresses replaced."""
    import socket
    from types import SimpleNamespace

    from memory.llm.adapters import LlmUnavailable, OpenAICompatibleLlm
    from memory.llm.replies import status_text

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]  # closed again before the call: nothing listens
    llm = OpenAICompatibleLlm(base_url=f"http://admin:s3cret@127.0.0.1:{port}/v1", model="m", timeout=2)
    with pytest.raises(LlmUnavailable) as caught:
        llm.complete_text([{"role": "user", "content": "hi"}])
    assert str(caught.value) == "the LLM endpoint could not be reached"
    error = SimpleNamespace(status_code=502, body={"message": "upstream http://10.1.2.3:8080/v1 refused"},
                            response=None)
    assert status_text(error) == "HTTP 502: upstream <hidden> refused"
    echo = SimpleNamespace(status_code=401, response=None, body={"message": (
        "Incorrect API key provided: Bearer sk-SECRETKEY123456. Upstream llm.internal.corp:8080 (10.1.2.3); "
        "got Basic bGxtdXNlcjpodW50ZXIyc2VjcmV0")})
    text = status_text(echo)
    for secret in ("SECRETKEY", "llm.internal.corp", "10.1.2.3", "bGxtdXNlcjpodW50ZXIyc2VjcmV0"):
        assert secret not in text, text
    assert text.startswith("HTTP 401: Incorrect ")  # what is not a secret stays
