"""The code examples of the Oracle SDK's thread API page (oracleagentmemory 26.8.0, "Threads"), run unchanged
except their imports against ``memory.client`` on the real engine, as doctests: every statement and every
printed output as the page gives them.

The one import change: ``from oracleagentmemory.core import ...`` becomes ``from memory.client import ...``
(the page's examples that use ``OracleContextCard``/``OracleSummary`` show no import: the test provides them
from ``memory.client``). ``db_pool``, ``embedder`` and ``llm``, which the page leaves to the reader, are an
arbitrary object (the constructor accepts an Oracle ``connection`` and ignores it: the database is Django's),
the embedder's model name (accepted and ignored: the site's embedder embeds) and a scripted LLM.

Examples that need records to exist get them first (``SETUP``), e.g. the relation ``relation-id`` that
``delete_record_link``/``update_record_link`` name. One output differs by nature: ``link_records`` returns a
generated id where the page prints the placeholder ``'relation-id'`` (``GENERATED``).
"""

import re

import pytest

from memory.client import AgentMemory, OracleContextCard, OracleSummary
from memory.llm.scripted import ScriptedLlm

SDK_IMPORT = "from oracleagentmemory.core import"
OUR_IMPORT = "from memory.client import"

#: name -> the example as the page prints it (statement lines, then the output lines).
EXAMPLES = {
    "create_thread": '''
from oracleagentmemory.core import MemoryExtractionConfig, OracleAgentMemory
client = OracleAgentMemory(connection=db_pool, embedder=embedder)
thread = client.create_thread(
    thread_id="c4",
    llm=llm,
    memory_extraction_config=MemoryExtractionConfig(enable_context_summary=True),
)
len(thread.add_messages([{"role": "user", "content": "I love pizza."}]))
1
''',
    "add_memory": '''
thread.add_memory("Remember this preference", memory_id="mem-thread-docs")
'mem-thread-docs'
''',
    "add_memory_async": '''
import asyncio
asyncio.run(thread.add_memory_async(
    "Remember this preference", memory_id="mem-thread-docs-async"
))
'mem-thread-docs-async'
''',
    "add_messages": '''
len(thread.add_messages([{"role": "user", "content": "Thread message from docs"}]))
1
''',
    "delete_memory": '''
thread.delete_memory("456")
0
''',
    "delete_memory_async": '''
import asyncio
asyncio.run(thread.delete_memory_async("456"))
0
''',
    "delete_message": '''
thread.delete_message("123")
0
''',
    "delete_message_async": '''
import asyncio
asyncio.run(thread.delete_message_async("123"))
0
''',
    "delete_record_link": '''
thread.delete_record_link(relation_id="relation-id")
1
''',
    "get_context_card": '''
thread.add_memory("User likes pizza", memory_id="mem-context-docs")
'mem-context-docs'
len(thread.add_messages([{"role": "user", "content": "Tell me about pizza"}]))
1
"User likes pizza" in thread.get_context_card().content
True
card = thread.get_context_card(
    max_relevant_results=4,
    min_relevant_results_by_type={"memory": 1},
)
len(card.relevant_results or []) <= 4
True
''',
    "get_context_card_async": '''
import asyncio
card = asyncio.run(thread.get_context_card_async(
    min_relevant_results_by_type={"preference": 1, "guideline": 1},
))
len(card.relevant_results or []) <= 5
True
''',
    "get_messages": '''
len(thread.add_messages([{"role": "user", "content": "Stored message example"}]))
1
messages = thread.get_messages()
messages[-1].content
'Stored message example'
''',
    "get_messages_async": '''
import asyncio
message_ids = asyncio.run(thread.add_messages_async(
    [{"role": "user", "content": "Stored message example"}]
))
len(message_ids)
1
messages = asyncio.run(thread.get_messages_async())
messages[-1].content
'Stored message example'
''',
    "get_summary": '''
len(thread.add_messages([{"role": "assistant", "content": "Summary source message"}]))
1
summary = thread.get_summary()
bool(summary.content)
True
''',
    "link_records": '''
thread.link_records(
    "fact-1", "fact", "memory-1", "memory", "supports"
)
'relation-id'
''',
    "update_memory_async": '''
import asyncio
memory_id = asyncio.run(thread.add_memory_async("Original memory"))
(
    asyncio.run(thread.update_memory_async(
        memory_id, content="Updated memory"
    ))
    == memory_id
)
True
''',
    "update_message": '''
message_id = thread.add_messages([{"role": "user", "content": "Draft message"}])[0]
thread.update_message(message_id, content="Edited message") == message_id
True
''',
    "update_message_async": '''
import asyncio
message_ids = asyncio.run(thread.add_messages_async(
    [{"role": "user", "content": "Draft message"}]
))
(
    asyncio.run(thread.update_message_async(
        message_ids[0], content="Edited message"
    ))
    == message_ids[0]
)
True
''',
    "update_record_link": '''
thread.update_record_link("relation-id", relation_type="supports")
1
''',
    "wait_for_memory_extraction": '''
thread.wait_for_memory_extraction(timeout=10)
''',
    "wait_for_memory_extraction_async": '''
import asyncio
asyncio.run(thread.wait_for_memory_extraction_async(timeout=10))
''',
    "OracleContextCard.content": '''
card = OracleContextCard(summary="ctx")
"<summary>" in card.content and "ctx" in card.content
True
''',
    "OracleContextCard.formatted_content": '''
OracleContextCard(summary="").formatted_content
''
card = OracleContextCard(summary="ctx", topics=["travel"])
"<topics>" in card.formatted_content
True
''',
    "OracleSummary": '''
summary = OracleSummary(content="Plan the Rome itinerary.")
summary.content
'Plan the Rome itinerary.'
str(summary)
'Plan the Rome itinerary.'
''',
    "OracleSummary.content": '''
OracleSummary(content="Keep the tea preference in mind.").content
'Keep the tea preference in mind.'
''',
    "OracleSummary.formatted_content": '''
OracleSummary(content="Thread recap").formatted_content
'Thread recap'
''',
}

#: Examples whose printed output is a generated value: the output line becomes a pattern.
GENERATED = {"link_records": ("'relation-id'", r"'[0-9a-f-]{36}'")}

def _complete(lines: list[str]) -> bool:
    try:
        compile("\n".join(lines), "<example>", "exec")
    except SyntaxError:
        return False
    return True


def run_example(name: str, namespace: dict) -> int:
    """Run one page example with doctest's rule: a statement that is an expression with a value other than
    None prints its ``repr``, which is the next line of the example. Returns the number of outputs checked."""
    lines = EXAMPLES[name].replace(SDK_IMPORT, OUR_IMPORT).strip("\n").split("\n")
    assert not any(line.startswith(SDK_IMPORT) for line in lines)
    checked, i = 0, 0
    while i < len(lines):
        j = i + 1
        while j <= len(lines) and (not _complete(lines[i:j]) or (j < len(lines) and lines[j][:1] in " )]}")):
            j += 1
        assert j <= len(lines), f"{name}: no complete statement from line {i}: {lines[i]!r}"
        source = "\n".join(lines[i:j])
        try:
            code, is_expression = compile(source, f"<{name}>", "eval"), True
        except SyntaxError:
            code, is_expression = compile(source, f"<{name}>", "exec"), False
        value = eval(code, namespace) if is_expression else exec(code, namespace)
        i = j
        if value is None:
            continue
        assert i < len(lines), f"{name}: {source!r} gives {value!r} but the page prints nothing"
        expected, i = lines[i], i + 1
        if name in GENERATED and expected == GENERATED[name][0]:
            assert re.fullmatch(GENERATED[name][1], repr(value)), (name, value)
        else:
            assert repr(value) == expected, (name, source, repr(value), expected)
        checked += 1
    return checked


@pytest.fixture
def namespace(transactional_db):
    """What the page's examples expect to exist: ``db_pool``, ``embedder``, ``llm``, and a ``thread``."""
    memory = AgentMemory(llm=None)
    thread = memory.create_thread(thread_id="docs", user_id="docs-user", agent_id="docs-agent")
    yield {"db_pool": object(), "embedder": "sentence-transformers/all-MiniLM-L6-v2",
           "llm": ScriptedLlm(['{"memories": []}'] * 4), "thread": thread,
           "OracleContextCard": OracleContextCard, "OracleSummary": OracleSummary}
    # an example's background extraction (create_thread's) ends before the tables are emptied: on PostgreSQL
    # the flush's TRUNCATE and the job's row locks would otherwise deadlock (SQLite's flush just waits)
    memory.wait_for_memory_extraction(timeout=120)


def _setup(name: str, thread) -> None:
    """Records an example names but does not create (the page's examples assume them)."""
    if name in ("delete_record_link", "update_record_link", "link_records"):
        thread.add_memory("a fact", memory_id="fact-1", memory_type="fact")
        thread.add_memory("a memory", memory_id="memory-1")
        thread.add_memory("another memory", memory_id="memory-2")
        if name != "link_records":
            thread.link_records("memory-2", "memory", "memory-1", "memory", "refines", relation_id="relation-id")


#: Printed outputs per example, counted on the page (so that an example cannot pass by printing nothing).
OUTPUTS = {"create_thread": 1, "get_context_card": 4, "get_context_card_async": 1, "get_messages": 2,
           "get_messages_async": 2, "get_summary": 2, "OracleContextCard.formatted_content": 2, "OracleSummary": 2,
           "update_memory_async": 1, "update_message": 1, "update_message_async": 1,
           "wait_for_memory_extraction": 0, "wait_for_memory_extraction_async": 0}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_page_example_runs_unchanged_except_imports(namespace, name):
    _setup(name, namespace["thread"])
    assert run_example(name, namespace) == OUTPUTS.get(name, 1)


def test_every_example_of_the_page_is_here():
    assert len(EXAMPLES) == 26  # the page's "Examples" sections, counted on the page
