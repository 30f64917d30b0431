"""The memory console: a web page served by engram itself (``console_listen``), over the same engine.

``frontend`` is the edge (HTTP, sessions, the mapping of domain errors to HTTP statuses), ``api`` the JSON
routes, each one engine call, ``codec`` JSON ↔ domain, ``plots`` the data behind the charts, ``http`` a small
HTTP/1.1 server on asyncio streams, ``sessions`` the login sessions. Static assets live in ``static/``.
Nothing here touches a store or an index: every read and write is an engine method, with the caller's key.
"""
