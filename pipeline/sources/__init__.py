"""One package per outside service: arxiv (OAI-PMH + API), s2 (Graph + Datasets API), pdf (downloads, text,
figures); local_corpus reads local test collections and JSONL. Only these talk HTTP."""
