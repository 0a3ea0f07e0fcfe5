"""The engine's ``manage.py`` commands; each adapts its arguments and calls the engine.

Modules: ``create_project``, ``add_project_member`` (tenants and their staff), ``export_memory``,
``import_memory`` (one user's memory as JSON Lines), ``erase_user`` (erasure of a user or agent),
``purge_expired`` (the expiry purge), ``import_locomo`` (LoCoMo conversations for ``bench/``),
``import_realtalk`` (REALTALK chats for ``bench/``),
``run_local_llm`` (the local llama.cpp server).
"""
