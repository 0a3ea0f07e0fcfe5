"""Django's SQLite backend with sqlite-vec (``ENGINE = "memory.backends.sqlite_vec"``).

Modules: ``base`` (the ``DatabaseWrapper`` Django loads, which loads the extension on each connection).
"""
