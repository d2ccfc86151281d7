"""arXiv: the OAI-PMH / API client (client), its records parsed into typed rows (records) and arXiv ids (ids)."""
