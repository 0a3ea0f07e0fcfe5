"""In-process Python API: ``AgentMemory`` and its ``Thread`` handles, and the SDK's public names.

Method names, parameters, defaults, return values and errors follow the
OracleThread API (the Oracle AI Agent Memory thread API spec). Every method has an
``_async`` twin that runs the same code in Django's thread-sensitive executor
(the ORM is synchronous; ``memory.core.aio.in_worker``).

    >>> client = AgentMemory()
    >>> thread = client.create_thread(thread_id="c4", user_id="u1", agent_id="a1")
    >>> thread.add_memory("Remember this preference", memory_id="mem-thread-docs")
    'mem-thread-docs'

This package is the engine's one public face: it names what an application
imports in place of ``oracleagentmemory`` (the client classes under their
names and the SDK's, its records, configs and enums), each defined once in the
module listed below. Engine code imports those modules, never this face.

Modules:

* ``agent``: ``AgentMemory``, the client of one project, made of the mixins ``agent_threads`` (threads and
  their settings), ``agent_records`` (memories, images and relations by id), ``agent_search`` (search and
  the project-wide lists) and ``agent_subjects`` (user and agent profiles, erasure).
* ``thread``: ``Thread``, a handle on one stored thread, made of the mixins
  ``thread_messages`` (messages, extraction waits), ``thread_memories`` (memories and their history),
  ``thread_images`` (standalone images), ``thread_links`` (relations) and ``thread_search``
  (search, summary, context card).
* ``common``: what both use: the SDK's thread runtime settings, config checks, the ``_async`` twin machinery.
"""

from memory.client.agent import AgentMemory
from memory.client.thread import Thread
from memory.core.types import (
    AgentProfileRecord,
    ContextCard,
    FactRecord,
    GuidelineRecord,
    ImageContent,
    ImageMimeType,
    ImageRecord,
    MemoryRecord,
    MemoryRetentionConfig,
    MemorySearchConfig,
    Message,
    MessageContent,
    MessageRecord,
    OracleContextCard,
    OracleSearchResult,
    OracleSummary,
    PreferenceRecord,
    Record,
    RecordRelation,
    RecordStatus,
    SearchResult,
    SearchScope,
    Summary,
    TextContent,
    TimeToLiveAnchor,
    UserProfileRecord,
)
from memory.extraction.config import (
    BackgroundExtractionQueueFullBehavior,
    MemoryExtractionConfig,
    MemoryExtractionImageContext,
    MemoryExtractionMode,
    MemoryLinkExtractionMode,
)
from memory.records.image_rules import ImageInputLimitConfig

#: The SDK's class names (``oracleagentmemory.core``): an application switches by changing its imports.
OracleThread = Thread
OracleAgentMemory = AgentMemory

__all__ = [
    "AgentMemory", "Thread", "OracleAgentMemory", "OracleThread",
    "AgentProfileRecord", "ContextCard", "FactRecord", "GuidelineRecord", "ImageContent", "ImageMimeType",
    "ImageRecord", "MemoryRecord", "MemoryRetentionConfig", "MemorySearchConfig", "Message", "MessageContent",
    "MessageRecord", "OracleContextCard", "OracleSearchResult", "OracleSummary", "PreferenceRecord", "Record",
    "RecordRelation", "RecordStatus", "SearchResult", "SearchScope", "Summary", "TextContent", "TimeToLiveAnchor",
    "UserProfileRecord",
    "BackgroundExtractionQueueFullBehavior", "MemoryExtractionConfig", "MemoryExtractionImageContext",
    "MemoryExtractionMode", "MemoryLinkExtractionMode", "ImageInputLimitConfig",
]
