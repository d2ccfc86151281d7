"""paperkb: a nightly literature pipeline (arXiv + Semantic Scholar) and a search index over
immutable snapshots. The import package is ``pipeline``; the console script is ``paperkb``."""

__version__ = "0.1.0"
