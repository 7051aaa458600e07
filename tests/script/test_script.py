"""Scripted sessions: mcprec as the client (``record --script``, ``script --init``), against real
servers; the recordings are read back with show, verify and replay like any other."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from support.helpers import MCPREC, SDK_SERVER, copy_cassette, dump, run_client, run_mcprec, sqlite
from support.http_helpers import start_sdk_http
from mcprec.cassette import open_cassette
from mcprec.script import load_scenario
from mcprec.script.examples import example
from mcprec.script.starter import template_variables, toml_value

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

GOLDEN = """\
name = "golden"
[client]
sampling = { text = "forty-two", model = "canned" }
[[steps]]
method = "tools/list"
[[steps]]
tool = "add"
arguments = { a = 2, b = 3 }
[[steps]]
tool = "forecast"
arguments = { city = "Paris" }
wait = false
[[steps]]
tool = "greet"
arguments = { name = "Ann" }
[[steps]]
tool = "slow"
arguments = { steps = 3 }
progress = true
[[steps]]
tool = "ask_model"
arguments = { question = "why?" }
[[steps]]
tool = "no-such-tool"
expect = "error"
[[steps]]
resource = "test://static/hello"
[[steps]]
prompt = "opener"
arguments = { name = "Bo" }
[[steps]]
notify = "notifications/roots/list_changed"
[[steps]]
sleep = "20ms"
[[steps]]
method = "ping"
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def rows(cassette: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with sqlite(cassette) as db:
        return db.execute(sql, args).fetchall()


def stderr(done: Any) -> str:
    return done.stderr.decode("utf-8", "replace")


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cassette with the GOLDEN scenario recorded against tests/peers/sdk_server.py."""
    d = tmp_path_factory.mktemp("golden")
    scenario = write(d / "golden.toml", GOLDEN)
    cassette = d / "golden.db"
    done = run_mcprec("record", "--script", str(scenario), "-c", str(cassette), "--",
                      sys.executable, str(SDK_SERVER))
    assert done.returncode == 0, stderr(done)
    assert "recorded session 'golden'" in stderr(done)
    return cassette


@pytest.fixture
def golden_copy(golden: Path, tmp_path: Path) -> Path:
    """A copy of the golden cassette, for tests that add sessions to it."""
    return copy_cassette(golden, tmp_path / "golden.db")


# --- what a scripted recording holds ----------------------------------------------------------


def test_scripted_session_is_recorded_like_a_tapped_one(golden: Path) -> None:
    """The session row, the pairing and the links are those of the stdio tap's recordings."""
    with open_cassette(golden) as c:
        s = c.session("golden")
        assert (s.status, s.transport, s.exit_code) == ("complete", "stdio", 0)
        assert s.target == [sys.executable, str(SDK_SERVER)]
        assert s.protocol_version == "2025-11-25"
        assert s.server_info["name"] == "mcprec-test-server"
        assert s.client_info["name"] == "mcprec"
        assert s.client_capabilities == {"sampling": {}}
        assert s.tags == {"script": "golden.toml"}
        messages = list(c.messages(s))
    methods = [m.method for m in messages if m.direction == "client_to_server" and m.method]
    assert methods[:3] == ["initialize", "notifications/initialized", "tools/list"]
    assert "notifications/roots/list_changed" in methods
    requests = [m for m in messages if m.kind == "request" and m.direction == "client_to_server"]
    answered = {m.reply_to for m in messages if m.kind in ("response", "error")}
    assert all(r.seq in answered for r in requests)  # every request paired with its answer
    sampling = next(m for m in messages if m.method == "sampling/createMessage"
                    and m.direction == "server_to_client")
    ask = next(m for m in requests if b"ask_model" in m.raw)
    assert sampling.context_seq == ask.seq  # the server's request is tied to the tool call
    answer = next(m for m in messages if m.reply_to == sampling.seq)
    assert answer.json["result"]["content"]["text"] == "forty-two"
    progress = [m for m in messages if m.method == "notifications/progress"]
    assert len(progress) == 3


def test_verify_against_the_same_server_passes(golden_copy: Path) -> None:
    """verify re-drives the same build from a scripted recording: exit 0."""
    done = run_mcprec("verify", str(golden_copy), "-s", "golden", "--",
                      sys.executable, str(SDK_SERVER))
    assert done.returncode == 0, done.stdout.decode() + stderr(done)
    assert b"Result: EQUAL" in done.stdout


def test_verify_against_a_changed_server_fails(golden_copy: Path) -> None:
    """verify against the v2 build of the server: exit 1, with its breaking changes named."""
    done = run_mcprec("verify", str(golden_copy), "-s", "golden", "--",
                      sys.executable, str(SDK_SERVER),
                      env={"MCPREC_TEST_SERVER_VARIANT": "v2"})
    report = done.stdout.decode()
    assert done.returncode == 1, report + stderr(done)
    assert "BREAKING  greet: required input 'greeting' added" in report
    assert "BREAKING  legacy: removed" in report
    assert '"Paris: sunny, 21 C" → "Paris: rain, 12 C"' in report


def test_scripted_session_replays_to_the_sdk_client(golden: Path) -> None:
    """mcprec replay serves the scripted session to the official SDK client."""

    async def same_calls(s: Any, run: Any) -> None:
        run.results["add"] = dump(await s.call_tool("add", {"a": 2, "b": 3}))
        run.results["hello"] = dump(await s.read_resource("test://static/hello"))

    run = run_client([*MCPREC, "replay", str(golden), "-s", "golden"], same_calls)
    assert run.results["add"]["structuredContent"] == {"result": 5}
    assert run.results["hello"]["contents"][0]["text"] == "Hello from the test server."


def test_show_and_export_read_a_scripted_session(golden: Path) -> None:
    """show and export treat the scripted session as any other."""
    shown = run_mcprec("show", str(golden), "golden")
    assert shown.returncode == 0
    assert b"sampling/createMessage" in shown.stdout
    exported = run_mcprec("export", str(golden), "golden", "--no-timing")
    assert exported.returncode == 0
    assert len(exported.stdout.splitlines()) > 20


# --- server-everything: roots, sampling, elicitation, progress, cancellation ---------------------


EVERYTHING = """\
name = "everything"
[client]
roots = [{ uri = "file:///srv/project", name = "project" }]
sampling = { text = "canned reply" }
elicitation = { action = "accept" }
[[steps]]
method = "tools/list"
[[steps]]
tool = "trigger-sampling-request"
arguments = { prompt = "hello?" }
[[steps]]
tool = "trigger-elicitation-request"
[[steps]]
tool = "get-roots-list"
[[steps]]
tool = "trigger-long-running-operation"
arguments = { duration = 0.3, steps = 3 }
progress = true
[[steps]]
tool = "trigger-long-running-operation"
arguments = { duration = 5, steps = 5 }
progress = true
cancel_after = "200ms"
"""


def test_everything_server_requests_are_answered_from_the_scenario(
        tmp_path: Path, everything_server: list[str]) -> None:
    """server-everything's sampling, elicitation and roots requests get the scenario's answers;
    progress is recorded, and a cancelled call is cancelled."""
    scenario = write(tmp_path / "everything.toml", EVERYTHING)
    cassette = tmp_path / "e.db"
    done = run_mcprec("record", "--script", str(scenario), "-c", str(cassette),
                      "--exit-timeout", "1", "--", *everything_server)
    assert done.returncode == 0, stderr(done)
    with open_cassette(cassette) as c:
        messages = list(c.messages(c.session("everything")))
    by_seq = {m.seq: m for m in messages}

    def answer_to(method: str) -> Any:
        request = next(m for m in messages if m.method == method
                       and m.direction == "server_to_client" and m.kind == "request")
        return next(m.json for m in messages if m.reply_to == request.seq)

    assert answer_to("sampling/createMessage")["result"]["content"]["text"] == "canned reply"
    assert answer_to("roots/list")["result"]["roots"] == [
        {"uri": "file:///srv/project", "name": "project"}]
    elicited = answer_to("elicitation/create")["result"]
    assert elicited["action"] == "accept"
    assert elicited["content"]["firstLine"] == "It was a dark and stormy night."  # its default
    tool_texts = [json.dumps(m.json) for m in messages if m.kind == "response"
                  and m.reply_to is not None and by_seq[m.reply_to].method == "tools/call"]
    assert any("canned reply" in t for t in tool_texts)
    assert any("file:///srv/project" in t for t in tool_texts)
    assert sum(m.method == "notifications/progress" for m in messages) >= 3
    assert any(m.method == "notifications/cancelled" for m in messages)


def test_starter_scenario_of_everything_records_as_written(
        tmp_path: Path, everything_server: list[str]) -> None:
    """`script --init` for server-everything writes a scenario that records with exit 0, and
    verify against the same server then runs it again."""
    scenario = tmp_path / "starter.toml"
    init = run_mcprec("script", "--init", "-o", str(scenario), "--", *everything_server)
    assert init.returncode == 0, stderr(init)
    text = scenario.read_text(encoding="utf-8")
    for tool in ("echo", "get-sum", "get-roots-list", "trigger-elicitation-request"):
        assert f'tool = "{tool}"' in text
    assert '# tool = "gzip-file-as-resource"' in text  # reaches the network: held back
    assert '# tool = "simulate-research-query"' in text  # a task-only tool: held back
    assert 'department = "Engineering"' in text  # from the server's completions
    cassette = tmp_path / "starter.db"
    done = run_mcprec("record", "--script", str(scenario), "-c", str(cassette),
                      "--exit-timeout", "1", "--", *everything_server, timeout=90)
    assert done.returncode == 0, stderr(done)
    with open_cassette(cassette) as c:
        s = c.session("everything")
        methods = {m.method for m in c.messages(s)}
    assert {"roots/list", "elicitation/create", "prompts/get", "resources/read"} <= methods


# --- HTTP --------------------------------------------------------------------------------------


HTTP_SCENARIO = """\
name = "over-http"
[client]
sampling = { text = "forty-two" }
[server]
headers = { Authorization = "Bearer ${SCRIPT_TEST_TOKEN}" }
[[steps]]
method = "tools/list"
[[steps]]
tool = "add"
arguments = { a = 2, b = 3 }
[[steps]]
tool = "slow"
arguments = { steps = 2 }
progress = true
[[steps]]
tool = "ask_model"
arguments = { question = "why?" }
[[steps]]
tool = "stream"
arguments = { steps = 50, delay_ms = 100 }
cancel_after = "150ms"
"""


def test_scripted_http_recording_verifies(tmp_path: Path) -> None:
    """Over Streamable HTTP through the recording proxy: headers from the environment,
    redacted in the cassette; the session ends with DELETE; verify --target passes."""
    scenario = write(tmp_path / "http.toml", HTTP_SCENARIO)
    cassette = tmp_path / "h.db"
    token = "sk-scripttest0123456789abcdef"
    server = start_sdk_http()
    try:
        done = run_mcprec("record", "--script", str(scenario), "-c", str(cassette),
                          "--target", server.url, env={"SCRIPT_TEST_TOKEN": token})
        assert done.returncode == 0, stderr(done)
        verified = run_mcprec("verify", str(cassette), "-s", "over-http", "--target",
                              server.url)
        assert verified.returncode == 0, verified.stdout.decode() + stderr(verified)
    finally:
        server.stop()
    assert token.encode() not in cassette.read_bytes()
    [(transport, status)] = rows(cassette, "SELECT transport, status FROM sessions "
                                 "WHERE name = 'over-http'")
    assert (transport, status) == ("http", "complete")
    headers = [json.loads(h)["headers"] for (h,) in rows(
        cassette, "SELECT m.http FROM messages m JOIN sessions s ON s.id = m.session_id "
        "WHERE s.name = 'over-http' AND m.direction = 'client_to_server'")]
    assert headers[0]["authorization"] == "Bearer [REDACTED]"


def test_starter_scenario_for_an_http_server(tmp_path: Path) -> None:
    """`script --init --target URL` writes a scenario naming that URL, which records as is."""
    scenario = tmp_path / "starter.toml"
    server = start_sdk_http()
    try:
        init = run_mcprec("script", "--init", "--target", server.url, "-o", str(scenario))
        assert init.returncode == 0, stderr(init)
        text = scenario.read_text(encoding="utf-8")
        assert f"url = {json.dumps(server.url)}" in text
        assert 'tool = "ask_model"' in text
        done = run_mcprec("record", "--script", str(scenario), "-c", str(tmp_path / "c.db"))
        assert done.returncode == 0, stderr(done)
    finally:
        server.stop()


def test_an_unreachable_http_server_fails_initialize_and_keeps_nothing(tmp_path: Path) -> None:
    """A --target nobody listens on: initialize fails (exit 1, the proxy's 502 in the line),
    and no session is left behind."""
    scenario = write(tmp_path / "s.toml", '[[steps]]\nmethod = "tools/list"\n')
    cassette = tmp_path / "c.db"
    done = run_mcprec("record", "--script", str(scenario), "-c", str(cassette), "--target",
                      "http://127.0.0.1:9/mcp")
    assert done.returncode == 1
    assert "initialize failed" in stderr(done)
    assert not cassette.exists() or rows(cassette, "SELECT count(*) FROM sessions") == [(0,)]


# --- many scenarios, one cassette ---------------------------------------------------------------


def test_a_directory_of_scenarios_records_one_session_each(tmp_path: Path) -> None:
    """--script DIR records each *.toml as its own session of one cassette, named after it."""
    scenarios = tmp_path / "scenarios"
    for name, tool in (("alpha", "add"), ("beta", "counter")):
        args = {"add": "{ a = 1, b = 2 }", "counter": "{}"}[tool]
        write(scenarios / f"{name}.toml", f'[[steps]]\ntool = "{tool}"\narguments = {args}\n')
    extra = write(tmp_path / "delta.toml", '[[steps]]\nmethod = "tools/list"\n')
    cassette = tmp_path / "many.db"
    done = run_mcprec("record", "--script", str(scenarios), "--script", str(extra), "-c",
                      str(cassette), "-t", "suite=smoke", "--", sys.executable, str(SDK_SERVER))
    assert done.returncode == 0, stderr(done)
    with open_cassette(cassette) as c:
        found = {s.name: s.tags for s in c.sessions()}
    assert found == {n: {"script": f"{n}.toml", "suite": "smoke"}
                     for n in ("alpha", "beta", "delta")}


# --- failing runs -------------------------------------------------------------------------------


def test_a_failed_step_exits_1_naming_it_and_keeps_the_run(tmp_path: Path) -> None:
    """An error answer to a step that expects none: exit 1 naming the step; the run is kept,
    tagged, and a second run under that name needs --replace."""
    scenario = write(tmp_path / "bad.toml", '[[steps]]\nmethod = "tools/list"\n'
                     '[[steps]]\nmethod = "resources/read"\nparams = { uri = "test://nope" }\n')
    cassette = tmp_path / "c.db"
    server = ["--", sys.executable, str(SDK_SERVER)]
    done = run_mcprec("record", "--script", str(scenario), "-c", str(cassette), *server)
    assert done.returncode == 1
    assert "step 2 (resources/read) failed: the server answered with an error" in stderr(done)
    [(tags,)] = rows(cassette, "SELECT tags FROM sessions WHERE name = 'bad'")
    assert json.loads(tags)["script_failed"].startswith("step 2 (resources/read) failed")
    again = run_mcprec("record", "--script", str(scenario), "-c", str(cassette), *server)
    assert again.returncode == 1
    assert "already has a session named 'bad'" in stderr(again)
    assert "--replace" in stderr(again)


def test_replace_swaps_the_session_only_after_a_passing_run(tmp_path: Path) -> None:
    """--replace leaves the old session alone when the new run fails, and replaces it when the
    new run passes."""
    scenario = tmp_path / "s.toml"
    cassette = tmp_path / "c.db"
    server = ["--", sys.executable, str(SDK_SERVER)]
    write(scenario, '[[steps]]\ntool = "add"\narguments = { a = 1, b = 1 }\n')
    assert run_mcprec("record", "--script", str(scenario), "-c", str(cassette),
                      *server).returncode == 0
    [(first_id,)] = rows(cassette, "SELECT id FROM sessions WHERE name = 's'")
    write(scenario, '[[steps]]\ntool = "add"\narguments = { a = 1, b = 1 }\nexpect = "error"\n')
    failed = run_mcprec("record", "--script", str(scenario), "-c", str(cassette), "--replace",
                        *server)
    assert failed.returncode == 1
    assert "expected an error, got a result" in stderr(failed)
    assert "session 's' is left as it was" in stderr(failed)
    assert rows(cassette, "SELECT id FROM sessions") == [(first_id,)]
    write(scenario, '[[steps]]\ntool = "add"\narguments = { a = 2, b = 2 }\n')
    passed = run_mcprec("record", "--script", str(scenario), "-c", str(cassette), "--replace",
                        *server)
    assert passed.returncode == 0, stderr(passed)
    [(name, second_id)] = rows(cassette, "SELECT name, id FROM sessions")
    assert name == "s" and second_id != first_id


def test_a_server_that_cannot_start_leaves_no_session(tmp_path: Path) -> None:
    """A missing server command: exit 127, the usual message, no session in the cassette."""
    scenario = write(tmp_path / "s.toml", '[[steps]]\nmethod = "tools/list"\n')
    cassette = tmp_path / "c.db"
    done = run_mcprec("record", "--script", str(scenario), "-c", str(cassette), "--",
                      "no-such-mcp-server-anywhere")
    assert done.returncode == 127
    assert "command not found: no-such-mcp-server-anywhere" in stderr(done)
    assert not cassette.exists() or rows(cassette, "SELECT count(*) FROM sessions") == [(0,)]


# --- the scenario's server settings -------------------------------------------------------------


def test_server_env_reaches_the_server_and_its_secrets_are_redacted(
        tmp_path: Path, everything_server: list[str]) -> None:
    """[server] env reaches the server, ${VAR:-default} fills in, and the value of a
    secret-named variable the scenario sets is redacted wherever the server repeats it."""
    scenario = write(tmp_path / "env.toml", """\
[server]
env = { SCRIPT_PROBE = "${SCRIPT_PROBE_UNSET:-from-default}", SERVICE_TOKEN = "tok-0123456789" }
[[steps]]
tool = "get-env"
""")
    cassette = tmp_path / "c.db"
    done = run_mcprec("record", "--script", str(scenario), "-c", str(cassette),
                      "--exit-timeout", "1", "--", *everything_server)
    assert done.returncode == 0, stderr(done)
    data = cassette.read_bytes()
    assert b"from-default" in data
    assert b"tok-0123456789" not in data
    assert b"[REDACTED]" in data


def test_server_cwd_is_relative_to_the_scenario_file(tmp_path: Path) -> None:
    """[server] cwd, relative to the scenario file, is where a relative server path runs."""
    write(tmp_path / "srv" / "server.py", SDK_SERVER.read_text(encoding="utf-8"))
    scenario = write(tmp_path / "conf" / "s.toml", f"""\
[server]
command = [{json.dumps(sys.executable)}, "server.py"]
cwd = "../srv"
[[steps]]
method = "tools/list"
""")
    (tmp_path / "elsewhere").mkdir()
    done = run_mcprec("record", "--script", str(scenario), "-c", str(tmp_path / "c.db"),
                      cwd=tmp_path / "elsewhere")
    assert done.returncode == 0, stderr(done)


# --- bad scenario files and options -------------------------------------------------------------


@pytest.mark.parametrize("text, message", [
    ('[[steps]]\nmethod = "tools/list"\n[[steps]\n', "s.toml:3: not valid TOML"),
    ('nmae = "x"\n[[steps]]\nmethod = "ping"\n',
     "s.toml:1: unknown key 'nmae' at the top level (did you mean 'name'?)"),
    ('[[steps]]\nmethod = "ping"\n\n[[steps]]\ntool = "a"\nargumnts = { x = 1 }\n',
     "s.toml:6: step 2: unknown key 'argumnts' in a step (did you mean 'arguments'?)"),
    ('[[steps]]\ntool = "a"\nmethod = "tools/call"\n',
     "s.toml:2: step 1: both 'method' and 'tool': a step does one thing"),
    ('[[steps]]\nsleep = "soon"\n', 's.toml:2: step 1: sleep must be a duration'),
    ('[[steps]]\nnotify = "notifications/x"\nexpect = "error"\n',
     "s.toml:3: step 1: 'expect' does not go with 'notify'"),
    ('[[steps]]\ntool = "a"\narguments = { key = "${SCRIPT_TEST_UNSET}" }\n',
     "step 1: arguments.key: ${SCRIPT_TEST_UNSET} is not set"),
    ('[client]\nsampling = { txt = "x" }\n[[steps]]\nmethod = "ping"\n',
     "s.toml:2: unknown key 'txt' in [client] sampling (did you mean 'text'?)"),
    ('[[steps]]\nmethod = "initialize"\n', "step 1: mcprec sends initialize itself"),
    ('[[steps]]\ntool = "slow"\ncancel_after = "1s"\nexpect = "error"\n',
     "step 1: a cancelled request gets no answer"),
    ('name = "x"\n', "s.toml: no steps"),
])
def test_bad_scenarios_are_one_line_errors(tmp_path: Path, text: str, message: str) -> None:
    """A bad scenario is one line naming file, line and step: exit 2, and no server starts."""
    scenario = write(tmp_path / "s.toml", text)
    checked = run_mcprec("script", "--check", str(scenario), cwd=tmp_path)
    assert checked.returncode == 2
    assert message in stderr(checked), stderr(checked)
    assert len(stderr(checked).strip().splitlines()) == 1
    cassette = tmp_path / "c.db"
    done = run_mcprec("record", "--script", "s.toml", "-c", str(cassette), "--",
                      sys.executable, str(SDK_SERVER), cwd=tmp_path)
    assert done.returncode == 2
    assert message in stderr(done)
    assert not cassette.exists()


@pytest.mark.parametrize("argv", [
    ["record", "--scrpit", "s.toml", "-c", "c.db", "--", "python", "server.py"],
    ["record", "--bogus", "--", "python", "server.py"],
    ["record", "-c", "c.db", "--bogus=1", "python", "server.py"],
    ["verify", "c.db", "--bogus", "--", "python", "server.py"],
    ["verify", "--bogus", "c.db", "--", "python", "server.py"],
    ["script", "--bogus", "--", "python", "server.py"],
])
def test_an_unknown_option_before_the_server_is_no_such_option(tmp_path: Path,
                                                                argv: list[str]) -> None:
    """An option that does not exist, before the server command, is "no such option" (exit 2),
    not a server of that name."""
    done = run_mcprec(*argv, cwd=tmp_path)
    assert done.returncode == 2
    assert "No such option '--" in stderr(done)
    assert "command not found" not in stderr(done)


def test_a_misspelt_script_option_suggests_the_right_one(tmp_path: Path) -> None:
    """The issue's own command with a typo: the message suggests --script."""
    done = run_mcprec("record", "--scrpit", "s.toml", "--", "python", "server.py", cwd=tmp_path)
    assert "Did you mean '--script'?" in stderr(done)


def test_server_options_after_the_command_still_pass_through(tmp_path: Path) -> None:
    """The server's own options, after its command, reach the server untouched."""
    scenario = write(tmp_path / "s.toml", '[[steps]]\nmethod = "tools/list"\n')
    done = run_mcprec("record", "--script", str(scenario), "-c", str(tmp_path / "c.db"), "--",
                      sys.executable, "-W", "ignore", str(SDK_SERVER))
    assert done.returncode == 0, stderr(done)


# --- the starter scenario -----------------------------------------------------------------------


def test_starter_scenario_covers_every_tool_and_records(tmp_path: Path) -> None:
    """`script --init` for the SDK server: every tool listed, placeholders marked "choose",
    a file that checks; recorded as written, it passes."""
    server = [sys.executable, str(SDK_SERVER)]
    init = run_mcprec("script", "--init", "--", *server)
    assert init.returncode == 0, stderr(init)
    text = init.stdout.decode()
    for tool in ("add", "echo", "counter", "forecast", "greet", "legacy", "slow", "ask_model"):
        assert f'tool = "{tool}"' in text
    assert 'city = "example"' in text and "# choose: a string" in text
    assert "# steps = 3" in text  # optional, with its default: commented
    scenario = write(tmp_path / "starter.toml", text)
    assert load_scenario(scenario).name == "mcprec-test-server"
    done = run_mcprec("record", "--script", str(scenario), "-c", str(tmp_path / "c.db"))
    assert done.returncode == 0, stderr(done)  # [server] command from the file


def test_init_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    """`script --init -o FILE` leaves an existing FILE alone unless --force."""
    out = write(tmp_path / "mine.toml", "# my own\n")
    done = run_mcprec("script", "--init", "-o", str(out), "--", sys.executable, str(SDK_SERVER))
    assert done.returncode == 2
    assert out.read_text() == "# my own\n"


@pytest.mark.parametrize("schema, value, source", [
    ({"type": "string", "default": "x"}, "x", "default"),
    ({"type": "integer", "examples": [7, 8]}, 7, "examples"),
    ({"type": "string", "enum": ["a", "b"]}, "a", "enum"),
    ({"oneOf": [{"const": "hero-1"}, {"const": "hero-2"}]}, "hero-1", "enum"),
    ({"type": "string", "format": "email"}, "user@example.com", "placeholder"),
    ({"type": "integer", "minimum": 5, "maximum": 9}, 5, "placeholder"),
    ({"type": ["null", "boolean"]}, False, "placeholder"),
    ({"type": "array", "items": {"type": "string"}, "minItems": 2}, ["example"] * 2,
     "placeholder"),
    ({"type": "object", "properties": {"a": {"type": "integer", "default": 3}, "b": {}},
      "required": ["a"]}, {"a": 3}, "default"),
    ({"anyOf": [{"type": "null"}, {"type": "number", "exclusiveMinimum": 0}]}, 0.5,
     "placeholder"),
])
def test_example_values_from_schemas(schema: dict[str, Any], value: Any, source: str) -> None:
    """A schema's own values come first; otherwise a placeholder of its type and bounds."""
    e = example(schema)
    assert (e.value, e.source) == (value, source)


def test_template_variables() -> None:
    """The variables of RFC 6570 templates, operators and modifiers removed."""
    assert template_variables("test://users/{user}/notes/{note}") == ["user", "note"]
    assert template_variables("file:///{+path}{?q,lang*}") == ["path", "q", "lang"]


_json = st.recursive(
    st.booleans() | st.integers(-2**63, 2**63 - 1) | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12)


@given(st.dictionaries(st.text(), _json, max_size=5))
def test_toml_values_read_back_as_written(value: dict[str, Any]) -> None:
    """What the starter writes as a TOML value parses back to the same value."""
    assert tomllib.loads(f"v = {toml_value(value)}")["v"] == value
