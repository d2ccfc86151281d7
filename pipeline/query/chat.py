"""One call to an OpenAI-compatible ``/chat/completions`` endpoint (Ollama, vLLM, llama.cpp, a hosted model):
the LLM query expansion (:mod:`pipeline.query.expand`) and ``paperkb ask`` (:mod:`pipeline.query.ask`) both
ask through it. Base URL, model and key are settings (``PAPERKB_LLM_*``); one attempt, no retries: the
caller's timeout is what the user waits, and each caller falls back on its own when the answer fails.

The timeout is a wall-clock deadline for the whole exchange (connecting, the model's wait, the body), not a limit
per socket read: an endpoint that sends a byte a second never ends a read's timeout, and held ``paperkb ask`` for
two minutes and ``serve``'s search workers for a minute. The exchange runs in a daemon thread that the caller
stops waiting for at the deadline (:class:`DeadlineExceeded`); the thread drops the connection at its next read
(at most one read timeout, the same number of seconds, later). At most ``llm_response_max_bytes`` of the body are
read: a longer answer is refused (:class:`AnswerError`) as soon as it is known to be longer."""

from __future__ import annotations

import json
import threading
import time
from typing import TYPE_CHECKING, Any

from pipeline.errors import ServiceUnreachable

if TYPE_CHECKING:
    from pipeline.settings import Settings

#: bytes asked of each read of the answer's body (a read returns what has arrived, up to this)
READ_CHUNK = 65536


class AnswerError(ValueError):
    """An answer from the LLM endpoint that holds nothing usable; the message says why."""


class DeadlineExceeded(TimeoutError):
    """The endpoint did not give its whole answer within the caller's timeout."""


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
        self.max_bytes = settings.llm_response_max_bytes
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
        """The answer's text, and whether it was cut at ``max_tokens``. Raises on any failure:
        :class:`DeadlineExceeded` when the whole answer has not come within ``timeout_s``."""
        deadline = time.monotonic() + self.timeout_s
        got: dict[str, Any] = {}
        done = threading.Event()

        def exchange() -> None:
            try:
                got["body"] = self._body(prompt, max_tokens, deadline)
            except BaseException as exc:  # handed to the caller
                got["error"] = exc
            finally:
                self.http.close()
                done.set()

        # a daemon thread: a process that gave up on the endpoint (paperkb ask) does not wait for it to exit
        threading.Thread(target=exchange, name="llm-answer", daemon=True).start()
        if not done.wait(max(0.0, deadline - time.monotonic())):
            raise DeadlineExceeded(f"no whole answer within {self.timeout_s:g} s")
        if "error" in got:
            raise got["error"]
        return answer_content(got["body"])

    def _body(self, prompt: str, max_tokens: int, deadline: float) -> bytes:
        """The answer's body, read as it arrives until it ends, the deadline passes or it is over ``max_bytes``."""
        r = self.http.request("POST", f"{self.base_url}/chat/completions", json=self.request_body(prompt, max_tokens),
                              stream=True)
        try:
            r.raise_for_status()
            declared = r.headers.get("Content-Length", "")
            if declared.isdigit() and int(declared) > self.max_bytes:
                raise AnswerError(too_long(self.max_bytes))
            body = bytearray()
            while chunk := r.raw.read1(READ_CHUNK, decode_content=True):
                body += chunk
                if len(body) > self.max_bytes:
                    raise AnswerError(too_long(self.max_bytes))
                if time.monotonic() > deadline:
                    raise DeadlineExceeded(f"no whole answer within {self.timeout_s:g} s")
            return bytes(body)
        finally:
            r.close()


def too_long(max_bytes: int) -> str:
    return f"the answer was longer than {max_bytes:,} bytes (PAPERKB_LLM_RESPONSE_MAX_BYTES)"


def answer_content(body: bytes) -> tuple[str, bool]:
    """The first choice's text of a chat-completions answer (its body), and whether it was cut at the token limit."""
    try:
        data = json.loads(body)
    except ValueError:
        raise AnswerError("the answer was not JSON") from None
    choices = data.get("choices") if isinstance(data, dict) else None
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

    if isinstance(exc, DeadlineExceeded):
        return f"timed out after {timeout_s:g} s"
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
