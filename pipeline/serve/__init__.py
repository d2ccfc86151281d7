"""HTTP API and search page over the published snapshot (``paperkb serve``)."""

from pipeline.serve.app import create_app

__all__ = ["create_app"]
