"""One call to an OpenAI-compatible ``/chat/completions`` endpoint (Ollama, vLLM, llama.cpp, a hosted model):
the LLM query expansion (:mod:`pipeline.query.expand`) and ``paperkb ask`` (:mod:`pipeline.query.ask`) both
ask through it. Base URL, model and key are settings (``PAPERKB_LLM_*``); one attempt, no retries: the
caller's timeout is what the user waits, and each caller falls back on its own when the answer fails."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.errors import ServiceUnreachable

if TYPE_CHECKING:
    import requests

    from pipeline.settings import Settings


class AnswerError(ValueError):
    """An answer from the LLM endpoint that holds nothing usable; the message says why."""


def configured(settings: Settings) -> bool:
    return bool(settings.llm_base_url and settings.llm_model)


class ChatEndpoint:
    """The configured endpoint; :meth:`complete` sends one user message and returns the answer's text."""

    def __init__(self, settings: Settings, timeout_s: float):
        if not configured(settings):
            raise ValueError("an LLM endpoint needs llm_base_url and llm_model")
        assert settings.llm_base_url is not None
        self.base_url = settings.llm_base_url.rstrip("/")
        self.model, self.timeout_s = settings.llm_model, timeout_s
        # the HTTP client (and requests) load only here: a search without an LLM never imports them
        from pipeline.sources.http import Endpoint, PoliteClient

        key = {"Authorization": f"Bearer {settings.llm_api_key}"} if settings.llm_api_key else {}
        self.http = PoliteClient(settings, Endpoint("the LLM endpoint", self.base_url, "PAPERKB_LLM_BASE_URL"),
                                 max_attempts=1, timeout_s=timeout_s, headers=key)

    def request_body(self, prompt: str, max_tokens: int) -> dict:
        """The chat-completions request: one user message, greedy (temperature 0), ``max_tokens``."""
        return {"model": self.model, "temperature": 0, "max_tokens": max_tokens,
                "messages": [{"role": "user", "content": prompt}]}

    def complete(self, prompt: str, max_tokens: int) -> tuple[str, bool]:
        """The answer's text, and whether it was cut at ``max_tokens``. Raises on any failure."""
        try:
            r = self.http.request("POST", f"{self.base_url}/chat/completions", json=self.request_body(prompt, max_tokens))
        finally:
            self.http.close()
        r.raise_for_status()
        return answer_content(r)


def answer_content(r: requests.Response) -> tuple[str, bool]:
    """The first choice's text of a chat-completions answer, and whether it was cut at the token limit."""
    try:
        body = r.json()
    except ValueError:
        raise AnswerError("the answer was not JSON") from None
    choices = body.get("choices") if isinstance(body, dict) else None
    if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
        raise AnswerError("the answer had no choices")
    message = choices[0].get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str) or not content.strip():
        raise AnswerError("the answer had no text")
    return content, choices[0].get("finish_reason") == "length"


def failure(exc: Exception, timeout_s: float) -> str:
    """Why the LLM did not help, in a few words."""
    import requests

    from pipeline.sources.http import RetryableHTTP

    if isinstance(exc, ServiceUnreachable):
        return f"cannot reach {exc.url}: {exc.reason}"
    if isinstance(exc, RetryableHTTP):
        if isinstance(exc.__cause__, requests.Timeout):
            return f"timed out after {timeout_s:g} s"
        if exc.status is not None:
            return f"HTTP {exc.status}"
    if isinstance(exc, requests.HTTPError) and exc.response is not None:
        return f"HTTP {exc.response.status_code}"
    if isinstance(exc, AnswerError):
        return str(exc)
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:160]  # one line, whatever the exception says
