"""``memory.client`` against the Oracle SDK it replaces (``oracleagentmemory`` 26.8.0, a test-only requirement).

An application written against the SDK should switch by changing its imports. This module compares,
programmatically, the installed SDK's pure-Python parts with ours:

* every public class of ``oracleagentmemory.core`` (and the record, message and result classes of
  ``oracleagentmemory.apis``) exists in ``memory.client`` under the same name;
* every enum's member names and values, exactly (exceptions would be listed in ``ENUM_VALUE_CASE``: none);
* every config field, in order, with its default and its resolved default (and the SDK's absolute maxima);
* every method signature of ``OracleThread`` and ``OracleAgentMemory`` (sync and ``_async``): positional
  parameters by name, kind and default; keyword-only ones by name, default and relative order; ``**kwargs``;
  the return type's name. Ours may add parameters only as keyword-only ones with defaults;
* the context-card text of the SDK's ``OracleContextCard`` renderer and ours on the same records;
* the token-budget trimming (``apply_token_budget``) on the same results;
* the TTL resolution helper on a table of cases.

Every allowed difference is listed below with its reason; a listed difference that no longer exists fails
too, so the lists stay true. The SDK is never imported by runtime code (``test_runtime_never_imports_sdk``).
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import pathlib
import re
import warnings

import oracleagentmemory.apis as sdk_apis
import oracleagentmemory.core as sdk
import pytest
from oracleagentmemory._notset import _NotSetMarker
from oracleagentmemory.core import imageinputlimitconfig as sdk_image_limits
from oracleagentmemory.core import retention as sdk_retention
from oracleagentmemory.core._postsearch import _tokenbudget as sdk_tokenbudget
from oracleagentmemory.core.extractors import memoryextractionconfig as sdk_extraction_config
from oracleagentmemory.core.searchresult import OracleSearchResult

from memory import client as ours
from memory.core.types import NOTSET

REPO = pathlib.Path(__file__).resolve().parents[2]

# --- names ----------------------------------------------------------------------------------------

#: Public names of ``oracleagentmemory.apis`` an application uses with threads and the client.
APIS_NAMES = (
    "Message", "MessageContent", "TextContent", "ImageContent", "ImageMimeType", "ImageRecord", "MemoryRecord",
    "FactRecord", "PreferenceRecord", "GuidelineRecord", "MessageRecord", "Record", "RecordStatus",
    "TimeToLiveAnchor", "ContextCard", "Summary", "RecordRelation",
)

#: SDK classes of ``oracleagentmemory.core`` that ``memory.client`` does not offer, and why.
ALLOWED_MISSING = {
    "OracleDBMemoryStore": "the store is the Django database (SQLite or Oracle settings), not an object",
    "OracleMemoryStore": "as OracleDBMemoryStore",
    "SchemaPolicy": "the schema is Django's migrations (manage.py migrate), not created by the client",
    "SearchIndexSyncMode": "Oracle Text index maintenance; the keyword index here is kept by the ORM",
    "SearchStrategy": "MemorySearchConfig.mode (VECTOR, KEYWORD, HYBRID) picks the ranking instead",
    "Reranker": "no LiteLLM reranker: LLMs are OpenAI-compatible endpoints (memory.llm.adapters)",
    "PruningMemorySearchConfig": "needs a reranker/pruner LLM (see Reranker)",
    "PruningEvaluationMode": "as PruningMemorySearchConfig",
    "TopKMemorySearchConfig": "MemorySearchConfig carries max_results itself",
    "OracleSearchResultFormatConfig": "results render one fixed way (format_content())",
    "SearchResultFormatConfig": "as OracleSearchResultFormatConfig",
    "MemoryLink": "relations are returned as RecordRelation",
    "MemoryLinkType": "relation types are the strings link_records takes",
    "MemoryLinkOppositeType": "as MemoryLinkType",
    "RelationType": "as MemoryLinkType",
}

#: Our names for the SDK's classes (ours keep their historical names; the SDK names are aliases).
CLASS_ALIASES = {"Thread": "OracleThread", "AgentMemory": "OracleAgentMemory", "ContextCard": "OracleContextCard",
                 "Summary": "OracleSummary", "SearchResult": "OracleSearchResult"}


def sdk_core_classes() -> list[str]:
    return sorted(name for name in dir(sdk) if not name.startswith("_") and isinstance(getattr(sdk, name), type))


def test_every_sdk_class_is_importable_from_memory_client():
    missing = [name for name in sdk_core_classes() + list(APIS_NAMES)
               if name not in ALLOWED_MISSING and not isinstance(getattr(ours, name, None), type)]
    assert missing == []


def test_allowed_missing_names_are_really_missing():
    assert [name for name in ALLOWED_MISSING if hasattr(ours, name)] == []
    assert set(ALLOWED_MISSING) <= set(dir(sdk))


# --- enums ----------------------------------------------------------------------------------------

#: Enums whose values are the SDK's in another case, and why: none today (``MemoryLinkExtractionMode`` was the
#: last). Every shared enum has the SDK's values exactly; input is accepted in any case.
ENUM_VALUE_CASE: dict[str, str] = {}

#: Shared enums whose values must equal the SDK's exactly (an SDK application compares or stores ``.value``).
EXACT_VALUE_ENUMS = ("MemoryExtractionMode", "BackgroundExtractionQueueFullBehavior", "MemoryLinkExtractionMode",
                     "MemoryExtractionImageContext", "RecordStatus", "TimeToLiveAnchor", "ImageMimeType")


def sdk_enums() -> dict[str, type[enum.Enum]]:
    found = {}
    for module in (sdk, sdk_apis):
        for name in dir(module):
            value = getattr(module, name)
            if isinstance(value, type) and issubclass(value, enum.Enum) and name not in ALLOWED_MISSING:
                found[name] = value
    return found


@pytest.mark.parametrize("name", sorted(sdk_enums()))
def test_enum_members(name):
    theirs, mine = sdk_enums()[name], getattr(ours, name)
    assert sorted(m.name for m in mine) == sorted(m.name for m in theirs)
    their_aliases = {n for n, m in theirs.__members__.items() if m.name != n}
    assert their_aliases <= set(mine.__members__)  # the SDK's aliases exist here too (it has none in 26.8.0)
    for member in theirs:
        value = mine[member.name].value
        if name in ENUM_VALUE_CASE:
            assert value == member.value.lower()
            assert mine(member.value) is mine[member.name]  # the SDK's spelling is accepted
        else:
            assert value == member.value
            assert mine(member.value) is mine[member.name]
    if issubclass(theirs, str):
        assert issubclass(mine, str)  # ours may be str enums where the SDK's are not (a superset)


@pytest.mark.parametrize("name", EXACT_VALUE_ENUMS)
def test_enum_names_and_values_are_exactly_the_sdks(name):
    theirs, mine = sdk_enums()[name], getattr(ours, name)
    assert {m.name: m.value for m in mine} == {m.name: m.value for m in theirs}
    for member in theirs:
        assert mine(member.value).value == member.value  # stored or compared .value round-trips


def test_exact_value_list_covers_every_shared_enum_but_the_listed_exceptions():
    assert set(EXACT_VALUE_ENUMS) == set(sdk_enums()) - set(ENUM_VALUE_CASE)


def test_enum_value_case_list_is_needed():
    for name in ENUM_VALUE_CASE:
        assert [m.value for m in getattr(ours, name)] != [m.value for m in sdk_enums()[name]]


# --- config classes -------------------------------------------------------------------------------

#: Fields ours add after the SDK's, and why.
EXTRA_FIELDS = {
    "MemoryExtractionConfig": {
        "review_memory_types": "the review policy (memory.records.review_rules): extracted memories of these types "
                               "wait for a reviewer before any agent reads them (memory.records.review_rules)",
        "review_added_memories": "the review policy: add_memory waits for review too (default False: trusted)"},
    "ImageInputLimitConfig": {"max_image_pixels": "decompression-bomb limit: Pillow decodes every image here"},
    "MemorySearchConfig": {"max_results": "the SDK's TopKMemorySearchConfig field (default 10)",
                           "mode": "VECTOR/KEYWORD/HYBRID ranking (SearchStrategy's role)"},
}

#: Resolved defaults that differ from the SDK's, and why.
RESOLVED_DEFAULT_DIFFERENCES = {
    ("MemoryExtractionConfig", "enable_context_summary"):
        "the page: 'Defaults to True for standalone OracleThread()'; the SDK's internal resolved default is False",
}


def _is_notset(value) -> bool:
    return isinstance(value, _NotSetMarker) or value is NOTSET


def _default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return "NOTSET" if _is_notset(f.default) else f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return "REQUIRED"


def _sdk_resolved(name: str) -> dict:
    if name == "MemoryExtractionConfig":
        return dataclasses.asdict(sdk_extraction_config._ResolvedMemoryExtractionConfig())
    if name == "ImageInputLimitConfig":
        return {"max_raw_image_bytes": sdk_image_limits.MAX_RAW_IMAGE_BYTES_DEFAULT,
                "max_images_per_llm_request": sdk_image_limits.MAX_IMAGES_PER_LLM_REQUEST_DEFAULT,
                "max_total_raw_image_bytes_per_llm_request":
                    sdk_image_limits.MAX_TOTAL_RAW_IMAGE_BYTES_PER_LLM_REQUEST_DEFAULT}
    if name == "MemoryRetentionConfig":
        return dataclasses.asdict(sdk_retention._validate_memory_retention_config(sdk.MemoryRetentionConfig()))
    if name == "MemorySearchConfig":
        return {"token_budget": None, "soft_token_budget": None}
    if name == "SearchScope":
        return {}  # resolved by the search using it
    raise AssertionError(name)


CONFIG_CLASSES = ("MemoryExtractionConfig", "ImageInputLimitConfig", "MemoryRetentionConfig", "MemorySearchConfig",
                  "SearchScope")


def _sdk_config_class(name):
    return getattr(sdk, name, None) or sdk_apis.searchscope.SearchScope


@pytest.mark.parametrize("name", CONFIG_CLASSES)
def test_config_fields_and_defaults(name):
    theirs, mine = _sdk_config_class(name), getattr(ours, name)
    their_fields = [(f.name, _default(f), f.kw_only) for f in dataclasses.fields(theirs)]
    my_fields = [(f.name, _default(f), f.kw_only) for f in dataclasses.fields(mine)]
    extra = EXTRA_FIELDS.get(name, {})
    assert [f for f in my_fields if f[0] not in extra] == their_fields
    assert my_fields[: len(their_fields)] == their_fields  # extras come after: positional construction agrees
    assert {f[0] for f in my_fields} - {f[0] for f in their_fields} == set(extra)
    resolved = mine()
    for field_name, value in _sdk_resolved(name).items():
        if (name, field_name) in RESOLVED_DEFAULT_DIFFERENCES:
            assert getattr(resolved, field_name) != value
            continue
        mine_value = getattr(resolved, field_name)
        if isinstance(value, enum.Enum):
            assert mine_value.name == value.name, field_name
        else:
            assert mine_value == value, field_name


def test_image_limit_maxima_and_errors():
    absolute = {"max_raw_image_bytes": sdk_image_limits.MAX_RAW_IMAGE_BYTES_ABSOLUTE,
                "max_images_per_llm_request": sdk_image_limits.MAX_IMAGES_PER_LLM_REQUEST_ABSOLUTE,
                "max_total_raw_image_bytes_per_llm_request":
                    sdk_image_limits.MAX_TOTAL_RAW_IMAGE_BYTES_PER_LLM_REQUEST_ABSOLUTE}
    for field_name, maximum in absolute.items():
        for value in (maximum, maximum + 1, 0, -1, None, True, 1.0, "5"):
            outcomes = []
            for cls in (sdk.ImageInputLimitConfig, ours.ImageInputLimitConfig):
                try:
                    outcomes.append(getattr(cls(**{field_name: value}), field_name))
                except (TypeError, ValueError) as exc:  # the error kind is what is compared
                    outcomes.append(ValueError if isinstance(exc, ValueError) else TypeError)
            assert outcomes[0] == outcomes[1], (field_name, value, outcomes)


#: Values the SDK accepts when the config is made and checks only when a thread resolves it; ours refuses
#: them at once (TypeError/ValueError naming the field), so a bad config fails where it is written.
EAGER_VALIDATION = {"extraction_mode", "memory_extraction_image_context", "memory_link_extraction_mode",
                    "memory_extraction_window", "extract_memories", "memory_extraction_inherit_message_metadata",
                    "background_extraction_queue_put_timeout_seconds"}


def test_extraction_config_errors_match():
    cases = [{"extraction_mode": "nope"}, {"memory_extraction_window": "3"}, {"extract_memories": 1},
             {"memory_extraction_inherit_message_metadata": "key"},
             {"background_extraction_queue_put_timeout_seconds": -1},
             {"memory_extraction_image_context": "nope"}, {"memory_link_extraction_mode": "nope"},
             {"extraction_mode": "INLINE"}, {"memory_extraction_token_limit": 0}]
    for kwargs in cases:
        outcomes = []
        for cls in (sdk.MemoryExtractionConfig, ours.MemoryExtractionConfig):
            try:
                cls(**kwargs)
                outcomes.append("ok")
            except (TypeError, ValueError) as exc:
                outcomes.append(ValueError if isinstance(exc, ValueError) else TypeError)
        if outcomes[0] == "ok" and set(kwargs) <= EAGER_VALIDATION:
            assert outcomes[1] in ("ok", ValueError, TypeError), kwargs
        else:
            assert outcomes[0] == outcomes[1], (kwargs, outcomes)


def test_retention_config_errors_match():
    for kwargs in ({"default_ttl_days": 0}, {"max_ttl_days": 0}, {"default_ttl_days": -1},
                   {"default_ttl_days": 100, "max_ttl_days": 10}, {"default_ttl_days": 5, "max_ttl_days": 10}):
        outcomes = []
        for make in (lambda: sdk_retention._validate_memory_retention_config(sdk.MemoryRetentionConfig(**kwargs)),
                     lambda: ours.MemoryRetentionConfig(**kwargs)):
            try:
                outcomes.append(dataclasses.asdict(make()))
            except ValueError:
                outcomes.append(ValueError)
        assert outcomes[0] == outcomes[1], (kwargs, outcomes)


# --- signatures -----------------------------------------------------------------------------------

#: Methods whose signature differs on purpose, and why.
ALLOWED_SIGNATURE_DIFFERENCES = {
    ("OracleThread", "__init__"): "handles are made by the client from a stored thread row, not from a store",
    ("OracleThread", "get_context_card"):
        "follows the page's parameter order (token_budget, soft_token_budget after max_relevant_results); "
        "the installed SDK puts them last",
    ("OracleThread", "get_context_card_async"): "as get_context_card",
}
#: Extra keyword-only parameters ours take on SDK methods, and why.
ALLOWED_EXTRA_PARAMETERS = {
    ("OracleAgentMemory", "__init__", "project"): "the project (tenant) every call of the client is in",
    ("OracleAgentMemory", "__init__", "tenant"): "a project with a fixed user and agent (restricted client)",
    ("OracleAgentMemory", "__init__", "retention_config"): "the earlier name of memory_retention_config",
    **{(owner, method, "derived_from"): "the memories the new one was inferred from (issue #32: dependants are "
                                        "flagged when a source changes, memory.links.dependants)"
       for owner in ("OracleThread", "OracleAgentMemory") for method in ("add_memory", "add_memory_async")},
}


def _param(p: inspect.Parameter):
    if p.default is inspect.Parameter.empty:
        default = "REQUIRED"
    elif _is_notset(p.default):
        default = "NOTSET"
    else:
        default = p.default
    return p.name, p.kind, default


def _return_name(annotation) -> str:
    if annotation is inspect.Signature.empty:
        return "?"
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    text = text.replace("'", "").split("[")[0].split(".")[-1].strip()
    return CLASS_ALIASES.get(text, text)


def _methods(cls) -> list[str]:
    names = [n for n in dir(cls) if not n.startswith("_") and callable(inspect.getattr_static(cls, n, None))
             and not isinstance(inspect.getattr_static(cls, n), property)]
    return names + ["__init__"] + (["_to_config"] if hasattr(cls, "_to_config") else [])


def compare_signatures(owner: str, name: str, theirs, mine) -> list[str]:
    """Differences between the SDK's and our signature of one method (empty: compatible)."""
    problems = []
    their_sig, my_sig = inspect.signature(theirs), inspect.signature(mine)
    their_params = [_param(p) for p in their_sig.parameters.values() if p.name != "self"]
    my_params = [_param(p) for p in my_sig.parameters.values() if p.name != "self"]
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    their_pos = [p for p in their_params if p[1] in positional]
    my_pos = [p for p in my_params if p[1] in positional]
    if their_pos != my_pos:
        problems.append(f"positional {their_pos} != {my_pos}")
    their_kw = [p for p in their_params if p[1] is inspect.Parameter.KEYWORD_ONLY]
    my_kw = {p[0]: p for p in my_params if p[1] is inspect.Parameter.KEYWORD_ONLY}
    for p in their_kw:
        if my_kw.get(p[0]) != p:
            problems.append(f"keyword-only {p} != {my_kw.get(p[0])}")
    order = [n for n in my_kw if n in {p[0] for p in their_kw}]
    if order != [p[0] for p in their_kw]:
        problems.append(f"keyword-only order {[p[0] for p in their_kw]} != {order}")
    for p in my_kw.values():
        if p[0] not in {q[0] for q in their_kw}:
            if p[2] == "REQUIRED":
                problems.append(f"extra required keyword {p[0]}")
            elif (owner, name, p[0]) not in ALLOWED_EXTRA_PARAMETERS:
                problems.append(f"extra keyword {p[0]} not listed")
    their_var = any(p[1] is inspect.Parameter.VAR_KEYWORD for p in their_params)
    my_var = any(p[1] is inspect.Parameter.VAR_KEYWORD for p in my_params)
    if their_var and not my_var:
        problems.append("no **kwargs")
    if any(p[1] is inspect.Parameter.VAR_POSITIONAL for p in my_params):
        problems.append("*args")
    if name != "__init__" and _return_name(their_sig.return_annotation) != _return_name(my_sig.return_annotation):
        problems.append(f"returns {_return_name(my_sig.return_annotation)}, "
                        f"not {_return_name(their_sig.return_annotation)}")
    if inspect.iscoroutinefunction(theirs) != inspect.iscoroutinefunction(mine):
        problems.append("async differs")
    return problems


SIGNATURE_CASES = [(owner, name) for owner, cls in (("OracleThread", sdk.OracleThread),
                                                     ("OracleAgentMemory", sdk.OracleAgentMemory))
                   for name in _methods(cls)]


@pytest.mark.parametrize(("owner", "name"), SIGNATURE_CASES)
def test_method_signature(owner, name):
    theirs = getattr(getattr(sdk, owner), name)
    mine_cls = getattr(ours, owner)
    assert hasattr(mine_cls, name), f"{owner}.{name} missing"
    problems = compare_signatures(owner, name, theirs, getattr(mine_cls, name))
    if (owner, name) in ALLOWED_SIGNATURE_DIFFERENCES:
        assert problems, f"{owner}.{name} is listed as different but matches"
    else:
        assert problems == []


def test_get_context_card_follows_the_page_order():
    names = [p for p in inspect.signature(ours.OracleThread.get_context_card).parameters if p not in ("self",)]
    assert names == ["fallback_message_count", "max_relevant_results", "token_budget", "soft_token_budget",
                     "max_recent_messages", "except_last_messages", "min_relevant_results_by_type",
                     "metadata_filter", "include_invalid_results", "kwargs"]
    their = [p for p in inspect.signature(sdk.OracleThread.get_context_card).parameters if p != "self"]
    assert sorted(their) == sorted(names)


@pytest.mark.parametrize("name", ["thread_id", "user_id", "agent_id", "metadata", "max_message_token_length",
                                  "message_shortening_input_token_limit"])
def test_thread_properties_exist(name, thread):
    assert isinstance(inspect.getattr_static(sdk.OracleThread, name), property)
    getattr(thread, name)  # readable on a real handle


# --- records and results --------------------------------------------------------------------------

RECORD_CLASSES = ("MemoryRecord", "FactRecord", "PreferenceRecord", "GuidelineRecord", "MessageRecord",
                  "ImageRecord")


def _our_instance(name):
    cls = getattr(ours, name)
    if name == "MessageRecord":
        return cls(role="user", content="c", id="x")
    if name == "ImageRecord":
        return cls(id="i", mime_type=ours.ImageMimeType.PNG, description="c")
    return cls(id="m", content="c")


@pytest.mark.parametrize("name", RECORD_CLASSES)
def test_record_classes_have_the_sdk_fields(name):
    theirs, mine = getattr(sdk_apis, name), _our_instance(name)
    missing = [f.name for f in dataclasses.fields(theirs) if not f.name.startswith("_") and not hasattr(mine, f.name)]
    assert missing == []
    record_type = next(f.default for f in dataclasses.fields(theirs) if f.name == "record_type")
    assert mine.record_type == record_type
    assert mine.content == "c"


def test_memory_subclasses():
    for name in ("FactRecord", "PreferenceRecord", "GuidelineRecord"):
        assert issubclass(getattr(ours, name), ours.MemoryRecord)


@pytest.mark.parametrize("name", ["id", "metadata", "status", "timestamp", "linked_results", "record", "content",
                                  "formatted_content", "distance"])
def test_search_result_attributes(name):
    assert hasattr(OracleSearchResult(0.25, sdk_apis.MemoryRecord(id="m1", content="c")), name)
    record = ours.MemoryRecord(id="m1", content="c", metadata={"k": 1}, timestamp="2024-01-01T00:00:00")
    result = ours.SearchResult(record=record, distance=0.25, score=0.75)
    getattr(result, name)
    assert result.id == "m1" and result.metadata == {"k": 1} and result.status == ours.RecordStatus.VALID
    assert result.timestamp == "2024-01-01T00:00:00" and result.linked_results == []
    assert result.format_content() == result.formatted_content


# --- rendering ------------------------------------------------------------------------------------

def _sdk_records():
    return [
        sdk_apis.MemoryRecord(id="m1", content="User likes <pizza> & pasta", timestamp="2024-01-01T00:00:00"),
        sdk_apis.FactRecord(id="f1", content="Lives in Rome\nsince 2020", status=sdk_apis.RecordStatus.INVALID),
        sdk_apis.PreferenceRecord(id="p1", content="Tea, not coffee"),
        sdk_apis.GuidelineRecord(id="g1", content="Answer briefly"),
        sdk_apis.MessageRecord(id="x1", content="hello there", role="user", seq_no=3,
                               timestamp="2024-02-02T10:00:00"),
        sdk_apis.ImageRecord(id="i1", content="a cat", mime_type=sdk_apis.ImageMimeType.PNG),
    ]


def _our_records():
    return [
        ours.MemoryRecord(id="m1", content="User likes <pizza> & pasta", timestamp="2024-01-01T00:00:00"),
        ours.FactRecord(id="f1", content="Lives in Rome\nsince 2020", status="invalid"),
        ours.PreferenceRecord(id="p1", content="Tea, not coffee"),
        ours.GuidelineRecord(id="g1", content="Answer briefly"),
        ours.Message(role="user", content="hello there", id="x1", timestamp="2024-02-02T10:00:00"),
        ours.ImageRecord(id="i1", description="a cat", mime_type=ours.ImageMimeType.PNG),
    ]


CARD_CASES = {
    "everything": dict(summary="Line one\n\n  line <two>\n", topics=["travel", "", "food & wine"], results=True,
                       recent=[("user", "hi <b>\n there", "2024-01-01"), ("assistant", "yo", None)]),
    "summary only": dict(summary="ctx"),
    "empty": dict(summary=""),
    "blank summary": dict(summary="   "),
    "topics only": dict(summary="", topics=["a"]),
    "empty topic only": dict(summary="", topics=[""]),
    "empty lists": dict(summary="", topics=[], recent=[]),
    "results only": dict(summary="", results=True),
    "recent only": dict(summary="", recent=[("user", "a  b\n\nc\t d ", None)]),
}


@pytest.mark.parametrize("case", sorted(CARD_CASES))
def test_context_card_text_matches_sdk_renderer(case):
    spec = CARD_CASES[case]
    recent = spec.get("recent")
    theirs = sdk.OracleContextCard(
        summary=spec["summary"], topics=spec.get("topics"),
        relevant_results=[OracleSearchResult(0.1, r) for r in _sdk_records()] if spec.get("results") else None,
        recent_messages=None if recent is None else [sdk_apis.Message(role=r, content=c, timestamp=t)
                                                     for r, c, t in recent])
    mine = ours.OracleContextCard(
        summary=spec["summary"], topics=spec.get("topics"),
        relevant_results=[ours.SearchResult(record=r, distance=0.1, score=0.9) for r in _our_records()]
        if spec.get("results") else None,
        recent_messages=None if recent is None else [ours.Message(role=r, content=c, timestamp=t)
                                                     for r, c, t in recent])
    assert mine.content == theirs.content
    assert mine.formatted_content == theirs.formatted_content


def test_search_result_text_matches_sdk():
    for theirs, mine in zip(_sdk_records(), _our_records()):
        their_result = OracleSearchResult(0.1, theirs)
        my_result = ours.SearchResult(record=mine, distance=0.1, score=0.9)
        assert my_result.formatted_content == their_result.formatted_content
        assert my_result.format_content() == their_result.format_content()
        assert my_result.content == their_result.content


def test_summary_matches_sdk():
    theirs, mine = sdk.OracleSummary(content="Plan the Rome itinerary."), ours.OracleSummary(
        content="Plan the Rome itinerary.")
    assert (mine.content, mine.formatted_content, str(mine)) == (theirs.content, theirs.formatted_content,
                                                                  str(theirs))


# --- token budgets --------------------------------------------------------------------------------

BUDGET_TEXTS = ["a", "short memory", "x" * 13, "y" * 14, "z" * 35, "w" * 36, "longer memory text " * 5,
                "q" * 100]
BUDGETS = [(None, None), (1, None), (10, None), (25, None), (26, None), (30, None), (40, None), (60, None),
           (None, 1), (None, 12), (None, 25), (None, 26), (None, 40), (60, 20), (20, 60), (0, None), (-3, 5)]


def test_token_budget_cases_match_sdk():
    from memory.search.request import apply_token_budgets

    their_results = [OracleSearchResult(0.1, sdk_apis.MemoryRecord(id=f"m{i}", content=text))
                     for i, text in enumerate(BUDGET_TEXTS)]
    my_results = [ours.SearchResult(record=ours.MemoryRecord(id=f"m{i}", content=text), distance=0.1, score=0.9)
                  for i, text in enumerate(BUDGET_TEXTS)]
    for hard, soft in BUDGETS:
        expected = [r.record.id for r in sdk_tokenbudget.apply_token_budget(list(their_results), hard, soft)]
        got = [r.record.id for r in apply_token_budgets(list(my_results), hard if hard and hard > 0 else None,
                                                        soft if soft and soft > 0 else None)]
        assert got == expected, (hard, soft)


def test_token_estimate_matches_sdk():
    from memory.search.request import estimate_budget_tokens

    for n in (0, 1, 2, 5, 6, 7, 8, 13, 14, 15, 35, 36, 100, 1001):
        assert estimate_budget_tokens("x" * n) == sdk_tokenbudget._estimate_text_tokens("x" * n), n


# --- TTL resolution -------------------------------------------------------------------------------

TTL_CONFIGS = [{}, {"default_ttl_days": 30}, {"max_ttl_days": 90}, {"default_ttl_days": 30, "max_ttl_days": 90},
               {"default_ttl_days": 0}, {"max_ttl_days": 0}, {"default_ttl_days": None, "max_ttl_days": None}]
TTL_VALUES = [NOTSET, None, 0, 1, 5, 30, 90, 365, -1]

#: TTL values the SDK coerces and ours refuses (TypeError): a ttl is a whole number of days.
TTL_STRICTER = [True, 1.5, "3"]


def _sdk_ttl(config: dict, value):
    cfg = sdk_retention._validate_memory_retention_config(sdk.MemoryRetentionConfig(**config))
    return sdk_retention._expand_ttl_days(cfg, sdk_retention.NOT_SET_MARKER if value is NOTSET else value, 1)[0]


@pytest.mark.parametrize("config", TTL_CONFIGS, ids=str)
def test_ttl_resolution_table(config):
    from memory.core.ttl import resolve_ttl_days

    for value in TTL_VALUES:
        outcomes = []
        for resolve in (lambda: _sdk_ttl(config, value),
                        lambda: resolve_ttl_days(value, ours.MemoryRetentionConfig(**config))):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    result = resolve()
                except ValueError:
                    result = ValueError
            outcomes.append((result, [w.category for w in caught]))
        assert outcomes[0] == outcomes[1], (config, value, outcomes)
    for value in TTL_STRICTER:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a clamp warning when the coerced value is above the maximum
            assert _sdk_ttl(config, value) is not None  # the SDK coerces it
        with pytest.raises(TypeError):
            resolve_ttl_days(value, ours.MemoryRetentionConfig(**config))


# --- runtime independence -------------------------------------------------------------------------

def test_runtime_never_imports_sdk():
    pattern = re.compile(r"^\s*(import|from)\s+oracleagentmemory", re.M)
    offenders = [str(path.relative_to(REPO)) for folder in ("memory", "threads", "staff", "oam_site")
                 for path in (REPO / folder).rglob("*.py") if pattern.search(path.read_text(encoding="utf-8"))]
    assert offenders == []
    requirements = (REPO / "requirements.txt").read_text(encoding="utf-8")
    assert "oracleagentmemory" not in requirements
    dev_lines = (REPO / "requirements-dev.txt").read_text(encoding="utf-8").splitlines()
    # the SDK is installed without its dependencies from requirements-sdk.txt (named in a comment only here)
    assert [line for line in dev_lines if "oracleagentmemory" in line and not line.startswith("#")] == []
    assert "oracleagentmemory==26.8.0" in (REPO / "requirements-sdk.txt").read_text(encoding="utf-8")
    assert "pip install -q --no-deps -r requirements-sdk.txt" in (REPO / "Makefile").read_text(encoding="utf-8")
