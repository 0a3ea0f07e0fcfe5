"""In-process Python API: ``AgentMemory`` and its ``Thread`` handles.

Method names, parameters, defaults, return values and errors follow the
OracleThread API (the Oracle AI Agent Memory thread API spec). Every method has an
``_async`` twin that runs the same code in Django's thread-sensitive executor
(the ORM is synchronous; ``memory.aio.in_worker``).

    >>> client = AgentMemory()
    >>> thread = client.create_thread(thread_id="c4", user_id="u1", agent_id="a1")
    >>> thread.add_memory("Remember this preference", memory_id="mem-thread-docs")
    'mem-thread-docs'
"""


from memory.client.common import *  # noqa: F401,F403  (re-exported: the SDK's public names)
from memory.client.common import (  # noqa: F401
    _or,
    _check_setting,
    _search_config_data,
    _check_search_config,
    _SEARCH_ARGUMENTS,
    _async_twin,
    _WithAsyncTwins,
)
from memory.client.thread import Thread
from memory.client.agent import AgentMemory




#: The SDK's class names (``oracleagentmemory.core``): an application switches by changing its imports.
OracleThread = Thread
OracleAgentMemory = AgentMemory
