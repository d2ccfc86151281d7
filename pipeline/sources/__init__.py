"""One module per outside service: arxiv (OAI-PMH + API), s2, pdf. Only these talk HTTP."""
