"""`streamlint server` driven by a real LSP client: pytest-lsp's, built on pygls.

The server binary comes from the STREAMLINT_BIN environment variable (tests/editor.rs sets
it). The client announces Visual Studio Code's capabilities, so the server negotiates as it
would with that editor.
"""

import asyncio
import os
import pathlib

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

REPO = pathlib.Path(__file__).resolve().parents[2]
# One SL001 on `del a` (line 13): `a` is freed while the side stream may still read it.
FIXTURE = REPO / "fixtures/python/SL001/bad_docs_pattern_del_without_record.py"
# Recording the side stream's use before the `del` is the fix.
RECORD = "    a.record_stream(side)\n"
PATIENCE = 20


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[os.environ["STREAMLINT_BIN"], "server"]),
)
async def client(lsp_client: LanguageClient, tmp_path: pathlib.Path):
    # The editor whose capabilities the client announces registers watchers on request; the
    # test client does not by itself.
    lsp_client.registrations = []

    @lsp_client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(client: LanguageClient, params: types.RegistrationParams):
        client.registrations.extend(params.registrations)

    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            root_uri=tmp_path.as_uri(),
        )
    )
    yield
    await lsp_client.shutdown_session()


async def published(client: LanguageClient, uri: str):
    """The diagnostics of the next publication (which must be for `uri`)."""
    params = await asyncio.wait_for(
        client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS), PATIENCE
    )
    assert params.uri == uri
    return list(params.diagnostics)


def open_copy(client: LanguageClient, tmp_path: pathlib.Path):
    """Open a copy of the fixture outside the repository; returns its URI, text and the
    zero-based line of the `del`."""
    text = FIXTURE.read_text()
    path = tmp_path / "offload.py"
    path.write_text(text)
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=path.as_uri(), language_id="python", version=1, text=text
            )
        )
    )
    line = text.splitlines().index("    del a  # streamlint-expect: SL001")
    return path.as_uri(), text, line


def change(client: LanguageClient, uri: str, version: int, start, end, text: str):
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(
                        start=types.Position(*start), end=types.Position(*end)
                    ),
                    text=text,
                )
            ],
        )
    )


@pytest.mark.asyncio
async def test_diagnostics_follow_the_edits(client: LanguageClient, tmp_path):
    uri, _, line = open_copy(client, tmp_path)
    diagnostics = await published(client, uri)
    assert [d.code for d in diagnostics] == ["SL001"]
    sl001 = diagnostics[0]
    assert sl001.source == "streamlint"
    assert sl001.severity == types.DiagnosticSeverity.Error
    assert sl001.code_description.href.endswith("/rules/SL001.md")
    assert sl001.range.start == types.Position(line, 4)
    assert "\n\n" in sl001.message, "the help is the message's second paragraph"
    assert sl001.related_information
    assert all(r.location.uri == uri for r in sl001.related_information)

    # The server asked to hear of changes to configuration and Python files.
    (watch,) = client.registrations
    assert watch.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES
    globs = [w["globPattern"] for w in watch.register_options["watchers"]]
    # Configuration files, and the project's Python and Rust files: a helper changed on disk is
    # read again, and its callers open in the editor are checked again.
    assert globs == ["**/streamlint.toml", "**/pyproject.toml", "**/*.py", "**/*.rs"]

    # Fixing the bug clears the diagnostic...
    change(client, uri, 2, (line, 0), (line, 0), RECORD)
    assert await published(client, uri) == []
    # ...and taking the fix out again brings it back.
    change(client, uri, 3, (line, 0), (line + 1, 0), "")
    assert [d.code for d in await published(client, uri)] == ["SL001"]

    client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    assert await published(client, uri) == []


@pytest.mark.asyncio
async def test_code_actions_suppress_the_finding(client: LanguageClient, tmp_path):
    uri, _, line = open_copy(client, tmp_path)
    (sl001,) = await published(client, uri)
    actions = await asyncio.wait_for(
        client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                range=sl001.range,
                context=types.CodeActionContext(diagnostics=[sl001]),
            )
        ),
        PATIENCE,
    )
    by_title = {a.title: a for a in actions}
    suppress = by_title["Suppress SL001 on this line"]
    assert suppress.kind == types.CodeActionKind.QuickFix
    assert suppress.diagnostics[0].code == "SL001"
    (document_edit,) = suppress.edit.document_changes
    assert document_edit.text_document.uri == uri
    (edit,) = document_edit.edits
    assert edit.range.start.line == line
    assert edit.new_text.endswith("streamlint: ignore[SL001]")

    change(client, uri, 2, (line, edit.range.start.character),
           (line, edit.range.end.character), edit.new_text)
    assert await published(client, uri) == []


@pytest.mark.asyncio
async def test_editor_settings_apply_on_top(client: LanguageClient, tmp_path):
    uri, _, _ = open_copy(client, tmp_path)
    assert [d.code for d in await published(client, uri)] == ["SL001"]
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"streamlint": {"ignore": ["SL001"]}})
    )
    assert await published(client, uri) == []
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"streamlint": {}})
    )
    assert [d.code for d in await published(client, uri)] == ["SL001"]


@pytest.mark.asyncio
async def test_helpers_of_a_module_without_stream_code_count_as_in_a_run(
    client: LanguageClient, tmp_path
):
    # The caller runs helpers from a module with no stream code of its own inside a side-stream
    # block: the editor indexes that module as `check` does, and finds the same two hazards.
    case = REPO / "fixtures/python/SL003/bad_plain_helper_module_called_inside_side_block"
    for name in ("block.py", "mixing.py"):
        (tmp_path / name).write_text((case / name).read_text())
    path = tmp_path / "block.py"
    text = path.read_text()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=path.as_uri(), language_id="python", version=1, text=text
            )
        )
    )
    diagnostics = await published(client, path.as_uri())
    expected = [
        (i, code.strip())
        for i, line in enumerate(text.splitlines())
        if "# streamlint-expect:" in line
        for code in line.split("# streamlint-expect:")[1].split(",")
    ]
    assert sorted((d.range.start.line, d.code) for d in diagnostics) == sorted(expected)
