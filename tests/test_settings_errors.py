"""Invalid settings are one line naming the environment variable and what it expects, exit code 2, for
every command (issue 28): a value out of range, an environment value that is not JSON, a line break in a
mail address, an embedding device this machine does not have."""

from __future__ import annotations

import os

import pytest
import typer.main

from pipeline.cli import app, main
from pipeline.errors import InvalidSetting
from pipeline.settings import Settings, env_name

# one invocation per command (required arguments filled in): each must read its settings first
COMMANDS = {
    "harvest": ["harvest"], "lookup": ["lookup", "2104.12255"], "enrich": ["enrich"], "fulltext": ["fulltext"],
    "extract": ["extract", "x.pdf"], "graph": ["graph"], "import-collection": ["import-collection", "x"],
    "import-pdfs": ["import-pdfs", "x"], "embed": ["embed"], "publish": ["publish"], "search": ["search", "q"],
    "related": ["related", "cisi:1"], "export": ["export", "cisi:1"], "match-library": ["match-library", "x.bib"],
    "path": ["path", "a", "b"], "recommend": ["recommend", "--pos", "cisi:1"], "feeds": ["feeds"],
    "eval": ["eval", "--queries", "q", "--qrels", "r"], "refresh": ["refresh"], "serve": ["serve"],
    "mcp": ["mcp"], "show": ["show", "cisi:1"], "papers": ["papers"], "author": ["author", "Salton"], "sql": ["sql", "SELECT 1"], "ask": ["ask", "q"],
    "snapshots list": ["snapshots", "list"], "snapshots verify": ["snapshots", "verify"],
    "snapshots rollback": ["snapshots", "rollback", "x"], "interests add": ["interests", "add", "n", "--query", "q"],
    "interests list": ["interests", "list"], "interests remove": ["interests", "remove", "n"],
}
NO_SETTINGS = {"dags-folder", "replay-server"}  # print a folder of the package; serve recorded answers


def _commands(group, prefix: tuple[str, ...] = ()) -> set[str]:
    out: set[str] = set()
    for name, cmd in group.commands.items():
        if hasattr(cmd, "commands"):  # a group (typer vendors its own click)
            out |= _commands(cmd, prefix + (name,))
        else:
            out.add(" ".join(prefix + (name,)))
    return out


def test_every_command_is_covered():
    assert _commands(typer.main.get_command(app)) - NO_SETTINGS == set(COMMANDS)


@pytest.fixture
def clean_env(tmp_path, monkeypatch):
    for key in list(os.environ):
        if key.startswith("PAPERKB_") and key != "PAPERKB_SERVE_ALLOWED_HOSTS":
            monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("PAPERKB_WAREHOUSE", str(tmp_path / "warehouse"))
    monkeypatch.chdir(tmp_path)
    return monkeypatch


def _one_line(err: str) -> str:
    assert "Traceback" not in err and "validation error" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("variable, value, line", [
    ("PAPERKB_SNAPSHOT_KEEP", "0", "setting PAPERKB_SNAPSHOT_KEEP is '0': expected an integer >= 1"),
    ("PAPERKB_CATEGORIES", "notjson", """setting PAPERKB_CATEGORIES is 'notjson': expected a JSON list of text, e.g. ["cs.AI"]"""),
])
def test_invalid_setting_is_one_line_exit_2_for_every_command(command, variable, value, line, clean_env, capsys):
    clean_env.setenv(variable, value)
    assert main(COMMANDS[command]) == 2
    assert _one_line(capsys.readouterr().err) == f"paperkb: error: {line}"


@pytest.mark.parametrize("variable, value, expected", [
    ("PAPERKB_SNAPSHOT_KEEP", "x", "setting PAPERKB_SNAPSHOT_KEEP is 'x': expected an integer >= 1"),
    ("PAPERKB_GRAPH_DAMPING", "1.5", "setting PAPERKB_GRAPH_DAMPING is '1.5': expected a number > 0 and < 1"),
    ("PAPERKB_S2_MODE", "bulk", "setting PAPERKB_S2_MODE is 'bulk': expected one of 'batch', 'per-paper', 'datasets'"),
    ("PAPERKB_LOCK_QUEUE", "maybe", "setting PAPERKB_LOCK_QUEUE is 'maybe': expected true or false"),
    ("PAPERKB_QUERY_WEIGHTS", "[1]", 'setting PAPERKB_QUERY_WEIGHTS is invalid: expected a JSON object of numbers, e.g. {"bm25": 0.4}'),
    ("PAPERKB_FEED_MAIL_TO", '["me@example.org\\r\\nBcc: all@example.org"]',
     "setting PAPERKB_FEED_MAIL_TO is invalid: the address 'me@example.org\\r\\nBcc: all@example.org' contains a line "
     "break or another control character"),
    ("PAPERKB_FEED_MAIL_TO", '[""]', "setting PAPERKB_FEED_MAIL_TO is invalid: an address is empty"),
    ("PAPERKB_FEED_MAIL_FROM", "me@example.org\nBcc: all@example.org",
     "setting PAPERKB_FEED_MAIL_FROM is invalid: the address 'me@example.org\\nBcc: all@example.org' contains a line "
     "break or another control character"),
])
def test_invalid_setting_names_the_variable_and_what_it_expects(variable, value, expected, clean_env):
    clean_env.setenv(variable, value)
    with pytest.raises(InvalidSetting) as info:
        Settings.load()
    assert str(info.value) == expected
    assert info.value.settings == [variable]


def test_every_invalid_setting_is_named_in_one_line(clean_env):
    clean_env.setenv("PAPERKB_FEED_SMTP_PORT", "0")
    clean_env.setenv("PAPERKB_FEED_SMTP_PASSWORD", "hunter2")
    with pytest.raises(InvalidSetting) as info:
        Settings.load(llm_timeout_s=0)
    assert str(info.value) == ("setting PAPERKB_LLM_TIMEOUT_S (given on the command line) is '0': expected a number > 0; "
                               "setting PAPERKB_FEED_SMTP_PORT is '0': expected an integer >= 1 and <= 65535")
    assert "hunter2" not in str(info.value)
    assert env_name("llm_api_key") == "PAPERKB_LLM_API_KEY or OPENAI_API_KEY"


def test_a_command_line_flag_out_of_range_is_named(clean_env, capsys):
    assert main(["graph", "--damping", "1.5"]) == 2
    assert _one_line(capsys.readouterr().err) == (
        "paperkb: error: setting PAPERKB_GRAPH_DAMPING (given on the command line) is '1.5': expected a number > 0 and < 1")


@pytest.mark.parametrize("device, why", [
    ("cuda", "CUDA is not available on this machine"),
    ("cuda:7", None),
    ("tpu:x", "expected a torch device such as cpu, cuda, cuda:1 or mps"),
])
def test_an_embedding_device_this_machine_lacks_is_one_line(device, why, clean_env, capsys):
    torch = pytest.importorskip("torch")
    if device.startswith("cuda") and torch.cuda.is_available():
        if torch.cuda.device_count() > 7:
            pytest.skip("this machine has 8 GPUs")
        why = "this machine has"
    why = why or "CUDA is not available on this machine"
    clean_env.setenv("PAPERKB_EMBED_DEVICE", device)
    assert main(["embed"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"paperkb: error: setting PAPERKB_EMBED_DEVICE (or --device) is {device!r}: {why}"), line
    assert main(["embed", "--device", device]) == 2  # the flag is checked the same way
    assert why in _one_line(capsys.readouterr().err)
