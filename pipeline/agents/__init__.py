"""Serving a published snapshot to LLM agents: the MCP server of ``paperkb mcp``.

:mod:`.server` registers the tools and the resource on the ``mcp`` SDK and runs the transports;
:mod:`.tools` is what each tool does with the query layer; :mod:`.answers` holds their output schemas;
:mod:`.catalogs` keeps the served snapshot's catalog connection.
Needs the ``mcp`` install profile (``pip install 'paperkb[mcp]'``).
"""
