"""memory.importer against the real export, hand-made edge cases and a 200 MB file."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from memory.clock import normalise_iso
from memory.errors import ImportFormatError, InvalidInput, NotRegularFile
from memory.importer import parse as import_parse
from memory.importer import reader as importer
from memory.importer.reader import ImportRecord, ImportStats, iter_export, iter_paths, read_header
from tests.helpers import REAL_EXPORT

ROOT = Path(__file__).resolve().parents[2]
REAL = REAL_EXPORT
SAMPLE = ROOT / "bot" / "data" / "sample_guild.json"


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while building
    spec.loader.exec_module(module)
    return module


def _author(uid: str = "111111111111111111", **extra: Any) -> dict[str, Any]:
    return {"id": uid, "name": "ada", "discriminator": "0000", "isBot": False, **extra}


def _msg(mid: str, content: str = "hello there", **extra: Any) -> dict[str, Any]:
    base = {
        "id": mid,
        "type": "Default",
        "timestamp": "2024-03-01T10:00:00.123+00:00",
        "content": content,
        "author": _author(),
    }
    return base | extra


def _dce(path: Path, messages: list[Any], **header: Any) -> Path:
    doc = {
        "guild": header.get("guild", {"id": "222222222222222222", "name": "G"}),
        "channel": header.get(
            "channel", {"id": "333333333333333333", "type": "GuildTextChat", "name": "general"}
        ),
        "messages": messages,
        "messageCount": len(messages),
    }
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return path


def _collect(path: Path, **kwargs: Any) -> tuple[list[ImportRecord], ImportFormatError | None]:
    """Records yielded before any error, and the error."""
    out: list[ImportRecord] = []
    try:
        for record in iter_export(path, **kwargs):
            out.append(record)
    except ImportFormatError as exc:
        return out, exc
    return out, None


# --------------------------------------------------------------------------
# The real export


def test_the_real_export_and_its_licence_ship_with_the_tests() -> None:
    assert REAL.is_file(), f"missing test fixture {REAL} (see tests/data/README.md)"
    licence = REAL.with_name("vesuvius-LICENSE.txt").read_text(encoding="utf-8")
    assert licence.startswith("MIT License") and "Permission is hereby granted" in licence


@pytest.fixture(scope="module")
def real_records() -> list[ImportRecord]:
    return list(iter_export(REAL))


def test_real_export_counts_match_the_file(real_records: list[ImportRecord]) -> None:
    source = json.loads(REAL.read_text(encoding="utf-8"))["messages"]
    kept = [m for m in source if m["type"] in ("Default", "Reply") and m["content"].strip()]
    system = [m for m in source if m["type"] not in ("Default", "Reply")]
    empty = [m for m in source if m["type"] in ("Default", "Reply") and not m["content"].strip()]

    stats = ImportStats()
    for record in real_records:
        stats.add(record)
    assert len(real_records) == len(source)
    assert stats.messages == len(kept) == len(source) - len(system) - len(empty)
    assert stats.skipped["empty_content"] == len(empty)
    assert sum(n for r, n in stats.skipped.items() if r.startswith("system_type:")) == len(system)
    assert stats.skipped["system_type:ThreadCreated"] == sum(
        m["type"] == "ThreadCreated" for m in source
    )
    assert [r.index for r in real_records] == list(range(len(source)))


def test_real_export_fields(real_records: list[ImportRecord]) -> None:
    doc = json.loads(REAL.read_text(encoding="utf-8"))
    by_id = {m["id"]: m for m in doc["messages"]}
    messages = [r.message for r in real_records if r.message is not None]
    replies = 0
    for msg in messages:
        src = by_id[msg.id]
        assert msg.guild_id == doc["guild"]["id"]
        assert msg.channel_id == doc["channel"]["id"]
        assert msg.source == "import"
        assert msg.author_id == src["author"]["id"]
        assert msg.author_name == (src["author"].get("nickname") or src["author"]["name"])
        assert msg.is_bot is src["author"]["isBot"]
        assert msg.content == src["content"].replace("\r\n", "\n")
        assert msg.created_at == normalise_iso(src["timestamp"])
        if src["type"] == "Reply":
            assert msg.reply_to_id == src["reference"]["messageId"]
            replies += 1
        else:
            assert msg.reply_to_id is None
    assert replies > 400
    # Spot checks by hand from the file.
    first = messages[0]
    assert (first.author_name, first.created_at) == ("JanPaul123", "2023-05-16T20:50:18.310Z")
    linked = [m for m in messages if m.reply_to_id in by_id]
    assert len(linked) >= 400


def test_positions_are_byte_offsets_of_record_ends(real_records: list[ImportRecord]) -> None:
    data = REAL.read_bytes()
    positions = [r.position for r in real_records]
    assert positions == sorted(positions)
    assert all(data[p - 1 : p] == b"}" for p in positions)
    # Between one record's end and the next record's start there is only ",\s".
    assert all(
        not data[a:b].split(b"{", 1)[0].strip(b", \n\r\t")
        for a, b in zip(positions, positions[1:], strict=False)
    )
    assert positions[-1] < len(data)


def test_read_header_of_real_export() -> None:
    header = read_header(REAL)
    assert header.format == "dce"
    assert (header.guild_name, header.channel_name) == ("Vesuvius Challenge", "papyrology")
    assert header.message_count == 2384
    assert header.size == REAL.stat().st_size


@pytest.mark.parametrize("chunk", [7, 1000, 65_536])
def test_chunk_boundaries_do_not_change_results(
    chunk: int, monkeypatch: pytest.MonkeyPatch, real_records: list[ImportRecord]
) -> None:
    # Tiny windows put chunk edges inside strings, numbers, escapes and
    # multi-byte UTF-8 sequences; the result must not change.
    monkeypatch.setattr(import_parse, "READ_CHUNK_BYTES", chunk)
    assert list(iter_export(REAL)) == real_records


def test_small_read_chunks_are_honoured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The test above only means something if the reader really reads in
    # chunks of READ_CHUNK_BYTES (it once read 1 MiB whatever the setting).
    monkeypatch.setattr(import_parse, "READ_CHUNK_BYTES", 7)
    path = _dce(tmp_path / "s.json", [_msg(str(i), f"message {i}") for i in range(1, 30)])
    with path.open("rb") as fh:
        reader = import_parse.ExportReader(fh, path)
        assert reader.peek() == "{"
        assert len(reader.buf) <= 4 + 7
    assert [r.message.content for r in iter_export(path) if r.message][-1] == "message 29"


# --------------------------------------------------------------------------
# Truncated and broken files


@pytest.mark.parametrize("fraction", [0.0001, 0.003, 0.5, 0.77, 0.999999])
def test_truncated_real_file(
    tmp_path: Path, fraction: float, real_records: list[ImportRecord]
) -> None:
    data = REAL.read_bytes()
    cut = int(len(data) * fraction)
    broken = tmp_path / "cut.json"
    broken.write_bytes(data[:cut])
    got, error = _collect(broken)
    assert error is not None
    assert error.path == str(broken)
    assert error.position is not None and error.position <= cut
    assert "truncated" in str(error) and f"at byte {error.position}" in str(error)
    # Everything that was complete before the cut was yielded, and identical.
    complete = [r for r in real_records if r.position <= cut]
    assert got == complete
    if got:
        assert error.position >= got[-1].position


def test_malformed_json_names_the_byte(tmp_path: Path, real_records: list[ImportRecord]) -> None:
    data = bytearray(REAL.read_bytes())
    # Break the ':' after "content" in the 1001st message.
    start = real_records[999].position
    colon = data.index(b'"content":', start) + len(b'"content"')
    data[colon : colon + 1] = b"@"
    broken = tmp_path / "broken.json"
    broken.write_bytes(bytes(data))
    got, error = _collect(broken)
    assert error is not None
    assert error.position == colon
    assert "malformed JSON" in str(error) and "message #1001" in str(error)
    assert got == real_records[:1000]


def test_invalid_utf8_names_the_byte(tmp_path: Path) -> None:
    path = _dce(tmp_path / "x.json", [_msg("1", "caf\u00e9 ok"), _msg("2", "MARK")])
    data = path.read_bytes()
    at = data.index(b"MARK")
    path.write_bytes(data[:at] + b"\xff" + data[at + 1 :])
    got, error = _collect(path)
    assert error is not None and error.position == at
    assert "UTF-8" in str(error)
    assert [r.message_id for r in got] == ["1"]


@pytest.mark.parametrize("text", ["", "   \n\t  "])
def test_empty_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "empty.json"
    path.write_text(text)
    with pytest.raises(ImportFormatError, match="empty") as info:
        list(iter_export(path))
    assert info.value.path == str(path) and info.value.position == len(text)


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ('{"foo": 1, "bar": [1, 2]}', "without a 'messages' array .*keys: foo, bar"),
        ("{}", "empty JSON object"),
        ('{"guild": {"id": "1"}, "channel": {"id": "2"}, "messages": {}}', "not an array"),
        ('{"messages": [{"id": "1"}]}', "'guild' and 'channel'"),
        ('{"guild": {"id": "x"}, "channel": {"id": "2"}, "messages": []}', "must be Discord ids"),
        ("[1, 2, 3]", "first element is not a Discord API message"),
        ('[{"guild": {}, "channel": {}, "messages": []}]', "list of DiscordChatExporter"),
        ('"just a string"', "not a DiscordChatExporter"),
        ("42", "not a DiscordChatExporter"),
    ],
)
def test_wrong_schema(tmp_path: Path, text: str, pattern: str) -> None:
    path = tmp_path / "wrong.json"
    path.write_text(text)
    with pytest.raises(ImportFormatError, match=pattern) as info:
        list(iter_export(path))
    assert info.value.path == str(path) and info.value.position is not None


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ('{"guild": {"id": "1"} "channel": {}}', "expected ',' or '}'"),
        ('{"guild": {"id": "1"}, guild: 1}', "field name in double quotes"),
        (
            '{"guild": {"id": "1"}, "channel": {"id": "2"}, "messages": [{"id": "1",}]}',
            "message #1",
        ),
        ('{"guild": {"id": "1"}, "channel": {"id": "2"}, "messages": [{}, ]}', "message #2"),
        (
            '{"guild": {"id": "1"}, "channel": {"id": "2"}, "messages": []} trailing',
            "after the end",
        ),
        ("[" * 100_000, "nested too deeply|ends in the middle"),
    ],
)
def test_broken_json(tmp_path: Path, text: str, pattern: str) -> None:
    path = tmp_path / "broken.json"
    path.write_text(text)
    with pytest.raises(ImportFormatError, match=pattern):
        list(iter_export(path))


def test_utf16_file_is_refused_clearly(tmp_path: Path) -> None:
    path = tmp_path / "u16.json"
    path.write_bytes(b"\xff\xfe" + "[]".encode("utf-16-le"))
    with pytest.raises(ImportFormatError, match="UTF-16"):
        list(iter_export(path))


def test_bom_is_accepted_and_counted(tmp_path: Path) -> None:
    path = _dce(tmp_path / "bom.json", [_msg("5", "with a byte order mark")])
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    (record,) = iter_export(path)
    assert record.message is not None and record.message.content == "with a byte order mark"
    assert path.read_bytes()[record.position - 1 : record.position] == b"}"


# --------------------------------------------------------------------------
# Message mapping


def test_dce_variants_and_skips(tmp_path: Path) -> None:
    messages: list[Any] = [
        _msg("1", "old export: no nickname, no roles, no stickers"),
        _msg("2", "nick", author=_author(nickname="Ada L.")),
        _msg("3", "reply", type="Reply", reference={"messageId": "1", "channelId": "3"}),
        _msg("4", "forward body", reference={"type": "Forward", "messageId": "9"}),
        _msg("5", "", forwardedMessage={"content": "someone else's words"}),
        _msg("6", "", attachments=[{"id": "7", "url": "x.png", "fileName": "x.png"}]),
        _msg("7", "   \n "),
        _msg("8", "Started a thread.", type="ThreadCreated", reference={"messageId": "1"}),
        _msg("9", "joined", type="GuildMemberJoin"),
        _msg("10", "slash command answer", type="20", author=_author("44", isBot=True)),
        _msg("11", "poll", type="46"),
        _msg("12", "thread starter", type="21"),
        _msg("13", "no author"),
        "not an object",
        _msg("14", "bad time", timestamp="yesterday"),
        _msg("15", "local time", timestamp="2024-03-01T12:00:00.1234567+02:00"),
        _msg("16", "cross-guild crosspost", reference={"messageId": "8", "guildId": "999"}),
        {"id": "17", "type": "Default", "timestamp": "2024-03-01T10:00:00Z", "content": "x"},
    ]
    del messages[12]["author"]
    path = _dce(tmp_path / "v.json", messages)
    records = list(iter_export(path))
    by_id = {r.message_id: r for r in records}
    assert [r.index for r in records] == list(range(len(messages)))
    assert by_id["1"].message is not None and by_id["1"].message.author_name == "ada"
    assert by_id["2"].message is not None and by_id["2"].message.author_name == "Ada L."
    assert by_id["3"].message is not None and by_id["3"].message.reply_to_id == "1"
    assert by_id["4"].message is not None and by_id["4"].message.reply_to_id is None
    assert by_id["5"].skip_reason == "forward"
    assert by_id["6"].skip_reason == "empty_content"
    assert by_id["7"].skip_reason == "empty_content"
    assert by_id["8"].skip_reason == "system_type:ThreadCreated"
    assert by_id["9"].skip_reason == "system_type:GuildMemberJoin"
    ten = by_id["10"].message
    assert ten is not None and ten.is_bot and ten.author_id == "44"
    assert by_id["11"].skip_reason == "system_type:PollResult"
    assert by_id["12"].skip_reason == "system_type:ThreadStarterMessage"
    assert by_id["13"].skip_reason == "bad_record" and "author" in (by_id["13"].detail or "")
    assert records[13].skip_reason == "bad_record" and records[13].message_id is None
    assert by_id["14"].skip_reason == "bad_record" and "timestamp" in (by_id["14"].detail or "")
    fifteen = by_id["15"].message
    assert fifteen is not None and fifteen.created_at == "2024-03-01T10:00:00.123Z"
    sixteen = by_id["16"].message
    assert sixteen is not None and sixteen.reply_to_id is None
    assert by_id["17"].skip_reason == "bad_record"


def test_dm_export_is_skipped(tmp_path: Path) -> None:
    path = _dce(
        tmp_path / "dm.json",
        [_msg("1", "private"), _msg("2", "also private")],
        guild={"id": "0", "name": "Direct Messages"},
        channel={"id": "333333333333333333", "type": "DirectTextChat", "name": "ada"},
    )
    records = list(iter_export(path))
    assert [r.skip_reason for r in records] == ["dm", "dm"]
    assert all(r.message is None for r in records)
    # A group DM in some other guild shape is a DM too.
    group = _dce(
        tmp_path / "group.json",
        [_msg("3", "x")],
        channel={"id": "4", "type": "DirectGroupTextChat", "name": "pals"},
    )
    assert [r.skip_reason for r in iter_export(group)] == ["dm"]


def test_raw_api_array(tmp_path: Path) -> None:
    def api(mid: Any, **extra: Any) -> dict[str, Any]:
        base = {
            "id": mid,
            "channel_id": "500000000000000000",
            "guild_id": "600000000000000000",
            "author": {"id": "700", "username": "adal", "global_name": "Ada", "bot": False},
            "content": f"message {mid}",
            "timestamp": "2024-05-01T08:30:00.500000+00:00",
            "edited_timestamp": None,
            "type": 0,
        }
        return base | extra

    rows = [
        api("1", member={"nick": "Countess"}),
        api("2"),
        api("3", author={"id": "701", "username": "bob", "global_name": None}),
        api("4", type=19, message_reference={"message_id": "1", "channel_id": "500"}),
        api("5", type=19, referenced_message={"id": "2"}),
        api("6", type=7, content=""),
        api("7", author={"id": "702", "username": "hook", "bot": True}, webhook_id="9"),
        api("8", guild_id=None),
        api("9", type=0, message_reference={"type": 1, "message_id": "1"}, content=""),
        api("10", message_snapshots=[{"message": {"content": "fwd"}}], content=""),
        api(11),  # integer ids are accepted
    ]
    path = tmp_path / "api.json"
    path.write_text(json.dumps(rows))
    records = list(iter_export(path))
    by_id = {r.message_id: r for r in records}
    names = {k: m.author_name for k in "123" if (m := by_id[k].message) is not None}
    assert names == {"1": "Countess", "2": "Ada", "3": "bob"}
    four, five = by_id["4"].message, by_id["5"].message
    assert four is not None and four.reply_to_id == "1"
    assert five is not None and five.reply_to_id == "2"
    assert by_id["6"].skip_reason == "system_type:GuildMemberJoin"
    seven = by_id["7"].message
    assert seven is not None and seven.is_bot
    assert by_id["8"].skip_reason == "no_guild"
    assert by_id["9"].skip_reason == "empty_content"
    assert by_id["10"].skip_reason == "forward"
    eleven = by_id["11"].message
    assert eleven is not None and eleven.id == "11"
    one = by_id["1"].message
    assert one is not None
    assert (one.guild_id, one.channel_id, one.created_at, one.source) == (
        "600000000000000000",
        "500000000000000000",
        "2024-05-01T08:30:00.500Z",
        "import",
    )
    # REST history lacks guild_id; the caller can say which guild it is.
    records = list(iter_export(path, default_guild_id="600000000000000000"))
    eight = records[7].message
    assert eight is not None and eight.guild_id == "600000000000000000"
    assert read_header(path).format == "api"


def test_empty_api_array_is_fine(tmp_path: Path) -> None:
    path = tmp_path / "none.json"
    path.write_text(" [ ] ")
    assert list(iter_export(path)) == []


NASTY = {
    "nul": "a\u0000b",
    "bell": "ring\u0007ring",
    "c1": "x\u0085y\u009fz",
    "crlf": "line1\r\nline2\rline3",
    "zero_width": "sys\u200btem \u200d \ufeff",
    "zwj_emoji": "family \U0001f468\u200d\U0001f469\u200d\U0001f467",
    "persian_zwnj": "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",
    "bidi": "\u202eevil\u202c",
    "lone_high": "\ud800 alone",
    "lone_low": "end \udc00",
    "reversed_pair": "\udc4d\ud83d",
}


@pytest.mark.parametrize("chunk", [1, 3, 1 << 20])
def test_nasty_content_is_made_safe(
    tmp_path: Path, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(import_parse, "READ_CHUNK_BYTES", chunk)
    messages = [_msg(str(i + 1), text) for i, text in enumerate(NASTY.values())]
    messages.append(_msg("90", "pair \ud83d\udc4d ok"))
    messages.append(_msg("91", "é" * 5000))
    messages.append(_msg("92", "name test", author=_author(nickname="  Evil\nNick\u0000 \ud800 ")))
    path = tmp_path / "nasty.json"
    # json.dumps writes lone surrogates as \\udXXX escapes, as a hostile file would.
    _dce(path, messages)
    assert "\\ud800" in path.read_text()
    records = list(iter_export(path))
    got = {r.message_id: r.message for r in records}
    assert all(m is not None for m in got.values())
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (content TEXT, name TEXT)")
    for msg in got.values():
        assert msg is not None
        msg.content.encode("utf-8")  # strict: no lone surrogates left
        msg.author_name.encode("utf-8")
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", msg.content)
        db.execute("INSERT INTO t VALUES (?, ?)", (msg.content, msg.author_name))
    contents = [m.content for m in got.values() if m is not None]
    assert contents[:5] == ["ab", "ringring", "xyz", "line1\nline2\nline3", NASTY["zero_width"]]
    assert contents[5:8] == [NASTY["zwj_emoji"], NASTY["persian_zwnj"], NASTY["bidi"]]
    assert contents[8:11] == ["\ufffd alone", "end \ufffd", "\ufffd\ufffd"]
    assert got["90"] is not None and got["90"].content == "pair \U0001f44d ok"
    assert got["91"] is not None and got["91"].content == "é" * importer.CONTENT_MAX_CHARS
    assert got["92"] is not None and got["92"].author_name == "Evil Nick \ufffd"


def test_large_message_object_across_many_chunks(tmp_path: Path) -> None:
    # Reaction user lists can make one message object large; it must parse
    # whole, and memory is then bounded by that object, not the file.
    users = [_author(str(10**17 + i)) for i in range(20_000)]
    big = _msg(
        "2", "popular", reactions=[{"emoji": {"name": "x"}, "count": 20_000, "users": users}]
    )
    path = _dce(tmp_path / "big.json", [_msg("1", "before"), big, _msg("3", "after")])
    assert path.stat().st_size > 3 * importer.READ_CHUNK_BYTES
    assert [r.message.content for r in iter_export(path) if r.message] == [
        "before",
        "popular",
        "after",
    ]


def test_oversized_value_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(import_parse, "MAX_VALUE_CHARS", 50_000)
    monkeypatch.setattr(import_parse, "READ_CHUNK_BYTES", 4096)
    path = tmp_path / "huge.json"
    path.write_text('{"guild": {"id": "1"}, "junk": "' + "x" * 200_000 + '"}')
    with pytest.raises(ImportFormatError, match="larger than"):
        list(iter_export(path))


def test_stopping_early_closes_the_file(tmp_path: Path) -> None:
    path = _dce(tmp_path / "s.json", [_msg(str(i), f"m{i}") for i in range(1, 50)])

    def open_fds() -> set[str]:
        return {os.readlink(fd) for fd in Path("/proc/self/fd").iterdir() if fd.is_symlink()}

    gen: Any = iter_export(path)
    first = next(gen)
    assert str(path) in open_fds()
    gen.close()
    assert str(path) not in open_fds()
    assert first.message is not None and first.message.content == "m1"


# --------------------------------------------------------------------------
# Paths and stats


def test_iter_paths(tmp_path: Path) -> None:
    (tmp_path / "b" / "deep").mkdir(parents=True)
    (tmp_path / "b" / ".hidden").mkdir()
    for name in ("b/deep/z.json", "b/a.JSON", "b/notes.txt", "b/.hidden/h.json", "c.json"):
        (tmp_path / name).write_text("[]")
    (tmp_path / "empty").mkdir()
    single = tmp_path / "c.json"
    got = list(iter_paths([tmp_path / "b", single, single, tmp_path / "empty"]))
    assert got == [tmp_path / "b" / "a.JSON", tmp_path / "b" / "deep" / "z.json", single]
    with pytest.raises(InvalidInput, match="no such file"):
        iter_paths([single, tmp_path / "missing.json"])
    with pytest.raises(InvalidInput, match="no .json"):
        iter_paths([tmp_path / "empty"])


@pytest.mark.parametrize(
    ("header", "named"),
    [
        ({"guild": {"id": "1"}, "channel": 7}, "'channel'"),
        ({"guild": [1, 2], "channel": {"id": "2"}}, "'guild'"),
        ({"guild": "G", "channel": None}, "'guild'"),
    ],
)
def test_wrongly_typed_header_fields_are_format_errors(
    tmp_path: Path, header: dict[str, Any], named: str
) -> None:
    path = tmp_path / "x.json"
    path.write_text(json.dumps({**header, "messages": [_msg("5")]}), encoding="utf-8")
    with pytest.raises(ImportFormatError, match=named):
        read_header(path)
    records, error = _collect(path)
    assert records == [] and error is not None and named in str(error)


def test_non_regular_files_and_broken_links_are_refused_without_reading(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop.name)
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to("missing/target.json")
    # A FIFO without a writer would block an ordinary open() for ever.
    with pytest.raises(NotRegularFile, match="FIFO"):
        read_header(fifo)
    with pytest.raises(NotRegularFile, match="FIFO"):
        list(iter_export(fifo))
    with pytest.raises(ImportFormatError, match="symbolic link loop"):
        read_header(loop)
    with pytest.raises(ImportFormatError, match="broken symbolic link"):
        list(iter_export(dangling))
    # They are listed (and then reported one by one), not a usage error.
    assert set(iter_paths([tmp_path])) == {fifo, loop, dangling}
    assert list(iter_paths([fifo])) == [fifo]


def test_stats() -> None:
    stats = ImportStats()
    stats.add(ImportRecord(position=10, index=0, message_id="1", skip_reason="empty_content"))
    stats.add(ImportRecord(position=20, index=1, message_id="2", skip_reason="empty_content"))
    stats.add(ImportRecord(position=30, index=2, message_id="3", skip_reason="dm"))
    stats.file_done(100)
    other = ImportStats(messages=5, bytes=50, files=1)
    stats.merge(other)
    assert stats.as_dict() == {
        "messages": 5,
        "skipped": {"dm": 1, "empty_content": 2},
        "bytes": 150,
        "files": 2,
        "channels": 0,
    }
    assert stats.total_skipped == 3
    assert stats.summary().startswith("5 messages, 3 skipped (empty_content 2, dm 1)")


# --------------------------------------------------------------------------
# The bundled sample guild

# Ordinary words, a Greek letter and a philosopher that happen to be part of
# some real user's name; they legitimately occur in papyrology talk.
_ORDINARY = {
    "philodemus", "cool", "experience", "sigma", "user", "incredible", "blue", "deleted",
    "dear", "giant", "reader",
}  # fmt: skip


def test_sample_reads_like_a_real_export() -> None:
    records = list(iter_export(SAMPLE))
    messages = [r.message for r in records if r.message is not None]
    assert 400 <= len(messages) <= 600
    assert len({m.author_id for m in messages}) >= 30
    ids = {m.id for m in messages}
    assert sum(m.reply_to_id in ids for m in messages) >= 40
    assert {m.guild_id for m in messages} == {"1200000000000000001"}
    header = read_header(SAMPLE)
    assert header.guild_name == "Papyrology Commons" and header.message_count == len(records)
    license_text = (SAMPLE.parent / "SAMPLE_LICENSE.txt").read_text()
    assert "MIT License" in license_text and "Nikhil Akula" in license_text
    assert "contiguous" in license_text


def test_sample_is_contiguous_stretches_of_the_channel() -> None:
    # Every message of the source between the stretches' bounds, in order, and
    # no other: the demo's memory is what an import of the channel gives, not
    # a selection of the messages that yield facts.
    make_sample = _script("make_sample")
    source = json.loads(REAL.read_text(encoding="utf-8"))["messages"]
    sample = json.loads(SAMPLE.read_text(encoding="utf-8"))["messages"]
    inside = [
        m
        for m in source
        if any(
            lo <= m["timestamp"][:19] and (hi is None or m["timestamp"][:19] < hi[:19])
            for lo, hi in make_sample.STRETCHES
        )
    ]
    assert len(make_sample.STRETCHES) >= 1
    assert [m["timestamp"] for m in sample] == [m["timestamp"] for m in inside]
    assert [m["type"] for m in sample] == [m["type"] for m in inside]
    first = source.index(inside[0])
    assert source[first : first + 10] == inside[:10]  # no gap inside a stretch


def test_sample_is_pseudonymised() -> None:
    source = json.loads(REAL.read_text(encoding="utf-8"))
    text = SAMPLE.read_text(encoding="utf-8")
    users: dict[str, dict[str, Any]] = {}
    for m in source["messages"]:
        found = [m["author"], *m.get("mentions", [])]
        found += [u for r in m.get("reactions", []) for u in r.get("users", [])]
        users.update((u["id"], u) for u in found)
    # No real Discord id of any kind: people, roles, guild, channel, messages.
    real_ids = set(users) | {source["guild"]["id"], source["channel"]["id"]}
    real_ids |= {m["id"] for m in source["messages"]}
    real_ids |= {r["id"] for u in users.values() for r in u.get("roles", [])}
    assert not set(re.findall(r"[0-9]{15,20}", text)) & real_ids
    # No real username or nickname, nor any ≥4-letter part of one.
    names: set[str] = set()
    for user in users.values():
        for name in (user["name"], user.get("nickname")):
            if name:
                names.add(name)
                names.update(re.findall(r"[^\W_]{4,}", name))
    words = set(re.findall(r"\w+", text.casefold()))

    def occurs(name: str) -> bool:
        folded = name.casefold()
        if re.fullmatch(r"\w+", folded):
            return folded in words
        return re.search(r"(?<!\w)" + re.escape(folded) + r"(?!\w)", text.casefold()) is not None

    leaked = sorted(
        n
        for n in names
        if len(n) >= 4 and not n.isdigit() and n.casefold() not in _ORDINARY and occurs(n)
    )
    assert leaked == []
    sample = json.loads(text)
    for msg in sample["messages"]:
        for user in [msg["author"], *msg["mentions"]]:
            assert "avatarUrl" not in user and user["roles"] == []
        assert all(a["url"] == "" for a in msg["attachments"])
    assert "discordapp" not in text and "json_Files" not in text
    assert sample["guild"]["name"] == "Papyrology Commons"


def test_sample_is_reproducible_from_the_script() -> None:
    make_sample = _script("make_sample")
    source = json.loads(REAL.read_text(encoding="utf-8"))
    rebuilt = json.dumps(make_sample.build(source), ensure_ascii=False, indent=2) + "\n"
    assert rebuilt == SAMPLE.read_text(encoding="utf-8")


# --------------------------------------------------------------------------
# 200 MB in bounded memory

_RSS_PROBE = textwrap.dedent(
    """
    import json, sys, time
    sys.path.insert(0, sys.argv[1])
    from memory.importer.reader import ImportStats, iter_export

    def status(key):
        with open("/proc/self/status") as fh:
            return next(int(l.split()[1]) for l in fh if l.startswith(key + ":"))

    # ru_maxrss of a child can carry the forking parent's (pytest's) peak, so
    # reset the kernel's high-water mark now and read VmHWM afterwards.
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    baseline = status("VmRSS")
    stats = ImportStats()
    began = time.perf_counter()
    for record in iter_export(sys.argv[2]):
        stats.add(record)
    took = time.perf_counter() - began
    print(json.dumps({"baseline_kib": baseline, "peak_kib": status("VmHWM"), "seconds": took,
                      "messages": stats.messages, "skipped": dict(stats.skipped)}))
    """
)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_200mb_export_in_bounded_memory(tmp_path: Path) -> None:
    make_big_export = _script("make_big_export")
    path = tmp_path / "big.json"
    written = make_big_export.write_big_export(path, 200 * 1024 * 1024)
    assert written.bytes >= 200 * 1024 * 1024

    # A fresh interpreter, so the peak is this import's alone.
    out = subprocess.run(
        [sys.executable, "-c", _RSS_PROBE, str(ROOT), str(path)],
        check=True,
        capture_output=True,
        text=True,
    )
    run = json.loads(out.stdout)
    peak_mib, base_mib = run["peak_kib"] / 1024, run["baseline_kib"] / 1024
    mb_s = written.bytes / 1e6 / run["seconds"]
    print(
        f"\n200 MB import: {written.bytes / 2**20:.0f} MiB, {run['messages']} messages in "
        f"{run['seconds']:.1f} s ({mb_s:.1f} MB/s, {run['messages'] / run['seconds']:.0f} msg/s); "
        f"peak RSS {peak_mib:.1f} MiB (Python + imports before reading: {base_mib:.1f} MiB)"
    )
    assert run["messages"] == written.importable
    assert run["skipped"] == written.skipped
    assert peak_mib < 150
    assert peak_mib - base_mib < 60
