"""Semantic Scholar: the Graph API client (client) and the Datasets API with its dataset files (datasets)."""
