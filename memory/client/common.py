"""What ``Thread`` and ``AgentMemory`` share: the SDK's thread runtime settings, config checks and the
``_async`` twin machinery (``memory.client``)."""

from __future__ import annotations

import dataclasses
import functools
import logging
from typing import Any, Protocol

from memory.core.aio import in_worker
from memory.core.types import (
    NOTSET,
    MemorySearchConfig,
)

logger = logging.getLogger(__name__)

#: Thread runtime settings of the SDK's OracleThread, with their defaults (SDK 26.8.0). They are kept in
#: ``Thread.config`` when given at creation (``create_thread``/``update_thread``) or set on one handle
#: (``get_thread``), and reported by ``_to_config()``; the prompts here are bounded by
#: ``MemoryExtractionConfig.memory_extraction_token_limit`` and the context-card rules instead, so
#: these four change no behaviour yet (docs/python.md, "Switching from oracleagentmemory").
THREAD_SETTINGS = {
    "max_message_token_length": 15_000,
    "message_shortening_input_token_limit": 30_000,
    "context_card_token_limit": 100_000,
    "context_card_type_search_concurrency": 5,
}
SEARCH_CONFIG_KEY = "search_config"


class SdkLlm(Protocol):
    """What ``llm=`` may be besides the engine's ``memory.llm.adapters.Llm``: the SDK's ``ILlm`` (such as
    ``oracleagentmemory.Llm``), an object with ``generate()``, which ``memory.llm.adapters.as_llm`` wraps."""

    def generate(self, *args: Any, **kwargs: Any) -> Any: ...


def _given(**arguments: Any) -> dict[str, Any]:
    """The keyword arguments a caller gave (not ``NOTSET``), in order: the inline settings of a client or thread."""
    return {name: value for name, value in arguments.items() if value is not NOTSET}


def _or(value: Any, default: Any) -> Any:
    """``default`` for an omitted (``NOTSET``) argument, else the value."""
    return default if value is NOTSET else value


def _check_setting(name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name}: must be an int")
    return value


def _search_config_data(config: MemorySearchConfig) -> dict[str, Any]:
    return dataclasses.asdict(config)


def _check_search_config(value: Any) -> MemorySearchConfig | None:
    if value is NOTSET or value is None:
        return None
    if not isinstance(value, MemorySearchConfig):
        raise TypeError("search_config: must be a MemorySearchConfig")
    return value

def _extensions(kwargs: dict[str, Any], *names: str) -> dict[str, Any]:
    """Take the keyword arguments ``names`` that the caller gave out of ``kwargs`` (a method's ``**kwargs``).

    Valid time (issue #32: ``valid_from``/``valid_to`` on ``add_memory``/``update_memory``, ``valid_at`` on
    ``search``/``list_memories``/``get_context_card``; recorded time, ``as_of`` on ``search``/``list_memories``) is
    not in the SDK: its arguments come through the
    ``**kwargs`` of the SDK's methods, so each method keeps the SDK's signature (tests/memory/test_sdk_parity.py)
    and any other unknown keyword is still a TypeError (``reject_unknown`` on what is left)."""
    return {name: kwargs.pop(name) for name in names if name in kwargs}


#: The search arguments besides the query and scope (spec: search; ``valid_at`` and ``as_of``: issue #32).
_SEARCH_ARGUMENTS = ("max_results", "token_budget", "soft_token_budget", "record_types", "metadata_filter",
                     "include_invalid_results", "num_hops", "max_linked_results", "valid_at", "as_of")


def _async_twin(method):
    """Make ``<name>_async`` for a sync method: same arguments, awaited in a worker thread."""

    @functools.wraps(method)
    async def twin(self, *args, **kwargs):
        return await in_worker(method, self, *args, **kwargs)

    twin.__name__ = f"{method.__name__}_async"
    twin.__qualname__ = f"{method.__qualname__}_async"
    twin.__doc__ = f"Asynchronous twin of :meth:`{method.__name__}` (same arguments, result and errors)."
    return twin


class _WithAsyncTwins:
    """Adds ``<name>_async`` for each name in ``_ASYNC`` to subclasses."""

    _ASYNC: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in cls._ASYNC:
            setattr(cls, f"{name}_async", _async_twin(getattr(cls, name)))
