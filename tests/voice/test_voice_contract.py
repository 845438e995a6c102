"""Contract with the private internals of discord.py, discord-ext-voice-recv and davey.

voice-recv is unmaintained and the adapter reaches into private hooks; these
tests fail loudly when an upgrade moves any of them, and exercise the
adapter against the libraries' real packet, decryptor and decoder classes.
"""

from __future__ import annotations

import inspect
import struct
from typing import Any

import davey
import discord
import nacl.secret
import pytest
from discord.ext import voice_recv
from discord.ext.voice_recv import rtp
from discord.ext.voice_recv.opus import PacketDecoder, VoiceData
from discord.ext.voice_recv.reader import PacketDecryptor
from discord.ext.voice_recv.router import PacketRouter

from bot.voice import discord_adapter as adapter
from bot.voice.types import FRAME_BYTES

MODE = "aead_xchacha20_poly1305_rtpsize"
KEY = bytes(range(32))


def opus_available() -> bool:
    try:
        return discord.opus.is_loaded() or discord.opus._load_default()
    except Exception:
        return False


# ── the internals, by name and signature ────────────────────────────────


def test_receive_internals_are_where_the_adapter_expects() -> None:
    problems = adapter.check_receive_internals()
    assert problems == [], "voice receive internals moved:\n  " + "\n  ".join(problems)


def test_installed_versions_are_the_verified_ones() -> None:
    assert adapter.installed_versions() == adapter.VERIFIED_VERSIONS, (
        "discord.py / discord-ext-voice-recv / davey changed. Re-read their voice "
        "internals (voice_state.py, ext/voice_recv/{reader,opus,router,voice_client}.py, "
        "davey/__init__.pyi), run this file, then update VERIFIED_VERSIONS."
    )


def test_upstream_listen_still_matches_our_override() -> None:
    # DaveRecvClient.listen re-implements VoiceRecvClient.listen so it can wrap
    # the decryptor before start(); if upstream's grows a step, we must copy it.
    src = inspect.getsource(voice_recv.VoiceRecvClient.listen)
    body = [
        line.strip()
        for line in src.splitlines()
        if line.strip() and not line.strip().startswith(("#", '"""', "def "))
    ]
    assert body == [
        "if not self.is_connected():",
        "raise discord.ClientException('Not connected to voice.')",
        "if not isinstance(sink, AudioSink):",
        "raise TypeError('sink must be an AudioSink not {0.__class__.__name__}'.format(sink))",
        "if self.is_listening():",
        "raise discord.ClientException('Already receiving audio.')",
        "self._reader = AudioReader(sink, self, after=after)",
        "self._reader.start()",
    ]
    ours = inspect.signature(adapter.DaveRecvClient.listen)
    theirs = inspect.signature(voice_recv.VoiceRecvClient.listen)
    assert list(ours.parameters) == list(theirs.parameters)


def test_gateway_hook_still_maps_ssrc_to_user() -> None:
    # The DAVE layer needs the sender's user id; voice-recv learns it from
    # SPEAKING (op 5) and READY through its websocket hook.
    src = inspect.getsource(voice_recv.gateway.hook)
    assert "vc._add_ssrc(uid, ssrc)" in src
    assert "vc._add_ssrc(vc.guild.me.id, data['ssrc'])" in src
    assert "hook=hook" in inspect.getsource(voice_recv.VoiceRecvClient.create_connection_state)


def test_davey_decrypt_contract() -> None:
    params = list(inspect.signature(davey.DaveSession.decrypt).parameters)
    assert params[-3:] == ["user_id", "media_type", "packet"]
    session = davey.DaveSession(davey.DAVE_PROTOCOL_VERSION, 1, 2)
    assert session.ready is False
    # Without an MLS group every decrypt fails with ValueError, which the
    # layer turns into silence.
    with pytest.raises(ValueError):
        session.decrypt(3, davey.MediaType.audio, b"\x01\x02\x03\xfa\xfa")
    assert isinstance(davey.MediaType.audio, davey.MediaType)


# ── the DAVE layer on voice-recv's real transport decryptor ─────────────


class RtpSender:
    """Sends the way discord.py does: its own AEAD rtpsize encrypt method."""

    checked_add = discord.VoiceClient.checked_add
    _encrypt = discord.VoiceClient._encrypt_aead_xchacha20_poly1305_rtpsize

    def __init__(
        self, ssrc: int, key: bytes = KEY, payload_type: int = 120, extension: bool = False
    ) -> None:
        self.ssrc = ssrc
        self.extension = extension
        self.secret_key = list(key)
        self._incr_nonce = 0
        self.sequence = 0
        self.timestamp = 0
        self.payload_type = payload_type

    def packet(self, payload: bytes) -> bytes:
        header = bytearray(12)
        header[0] = 0x80
        header[1] = self.payload_type
        struct.pack_into(">HII", header, 2, self.sequence, self.timestamp, self.ssrc)
        self.sequence = (self.sequence + 1) & 0xFFFF
        self.timestamp = (self.timestamp + 960) & 0xFFFFFFFF
        if not self.extension:
            return self._encrypt(bytes(header), payload)
        # Real clients add a one-byte header extension (audio level). In the
        # rtpsize modes its 4-byte header is authenticated in the clear and its
        # values are encrypted together with the payload.
        header[0] |= 0x10
        ext_header = b"\xbe\xde\x00\x01"
        ext_values = b"\x10\x7f\x00\x00"
        return self._encrypt(bytes(header) + ext_header, ext_values + payload)


class FakeDaveSession:
    """Stands in for davey.DaveSession (a live MLS group needs Discord's voice server).

    "Encrypts" per sender with a XOR key, a one-byte check standing in for
    the AES-GCM tag, and the real 0xFAFA trailer; records calls.
    """

    ready = True

    def __init__(self, members: set[int]) -> None:
        self.members = members
        self.calls: list[tuple[int, Any]] = []

    @staticmethod
    def _key(user_id: int) -> int:
        return user_id % 251 + 1

    @classmethod
    def seal(cls, user_id: int, frame: bytes) -> bytes:
        k = cls._key(user_id)
        return bytes(b ^ k for b in frame) + bytes([sum(frame) % 256]) + adapter.DAVE_MAGIC

    def decrypt(self, user_id: int, media_type: Any, packet: bytes) -> bytes:
        self.calls.append((user_id, media_type))
        if not packet.endswith(adapter.DAVE_MAGIC):
            raise ValueError("Failed to decrypt: UnencryptedWhenPassthroughDisabled")
        if user_id not in self.members:
            raise ValueError("Failed to decrypt: NoValidCryptorFound")
        k = self._key(user_id)
        frame = bytes(b ^ k for b in packet[:-3])
        if sum(frame) % 256 != packet[-3]:
            raise ValueError("Failed to decrypt: DecryptionFailed")
        return frame


class FakeConnection:
    def __init__(self, dave_session: Any) -> None:
        self.dave_session = dave_session


class FakeVoiceClient:
    def __init__(self, ssrc_to_id: dict[int, int], dave_session: Any) -> None:
        self._ssrc_to_id = ssrc_to_id
        self._connection = FakeConnection(dave_session)

    def _get_id_from_ssrc(self, ssrc: int) -> int | None:
        return self._ssrc_to_id.get(ssrc)


def layer_for(session: Any, ssrc_to_id: dict[int, int]) -> adapter.DaveLayer:
    decryptor = PacketDecryptor(MODE, KEY)
    return adapter.DaveLayer(FakeVoiceClient(ssrc_to_id, session), decryptor.decrypt_rtp)


def receive(layer: adapter.DaveLayer, raw: bytes) -> bytes:
    return layer(rtp.decode_rtp(raw))


def test_dave_layer_decrypts_after_transport_and_counts() -> None:
    session = FakeDaveSession({42})
    layer = layer_for(session, {1000: 42})
    opus = b"\x78\x01\x02\x03opus-frame"
    assert receive(layer, RtpSender(1000).packet(FakeDaveSession.seal(42, opus))) == opus
    assert session.calls == [(42, davey.MediaType.audio)]
    assert layer.stats["dave_ok"] == 1 and layer.stats["frames"] == 1


def test_dave_layer_turns_unreadable_frames_into_silence() -> None:
    session = FakeDaveSession({42})
    layer = layer_for(session, {1000: 42, 1001: 43})
    sealed = FakeDaveSession.seal(42, b"\x78hello")
    # SSRC not mapped to a user yet → no key → silence.
    assert receive(layer, RtpSender(2000).packet(sealed)) == adapter.OPUS_SILENCE
    # Mapped, but the sender's key is unknown (epoch change) → silence.
    assert receive(layer, RtpSender(1001).packet(FakeDaveSession.seal(43, b"x"))) == (
        adapter.OPUS_SILENCE
    )
    # Camera/screen share RTP on the audio socket → silence, DAVE never asked.
    before = len(session.calls)
    assert receive(layer, RtpSender(1000, payload_type=103).packet(sealed)) == (
        adapter.OPUS_SILENCE
    )
    assert len(session.calls) == before
    stats = layer.stats
    assert (stats["no_user"], stats["failed"], stats["not_audio"]) == (1, 1, 1)


def test_dave_layer_after_rtpsize_header_extension() -> None:
    session = FakeDaveSession({42})
    layer = layer_for(session, {1000: 42})
    sender = RtpSender(1000, extension=True)
    packet = rtp.decode_rtp(sender.packet(FakeDaveSession.seal(42, b"\x78ext")))
    assert layer(packet) == b"\x78ext"
    assert packet.extension_data == {1: b"\x7f"}


def test_dave_layer_passes_plain_frames() -> None:
    session = FakeDaveSession({42})
    layer = layer_for(session, {1000: 42})
    # Opus silence is never E2E-encrypted.
    assert receive(layer, RtpSender(1000).packet(adapter.OPUS_SILENCE)) == adapter.OPUS_SILENCE
    # A sender in a passthrough transition sends plain Opus (no 0xFAFA trailer).
    assert receive(layer, RtpSender(1000).packet(b"\x78plain")) == b"\x78plain"
    # No DAVE session at all (stage channel / not negotiated): transport only.
    no_dave = layer_for(None, {1000: 42})
    assert receive(no_dave, RtpSender(1000).packet(b"\x78abc")) == b"\x78abc"
    assert layer.stats["plain"] == 2 and no_dave.stats["plain"] == 1


def test_dave_layer_with_a_real_session_without_group_yields_silence() -> None:
    session = davey.DaveSession(davey.DAVE_PROTOCOL_VERSION, 1, 2)
    layer = layer_for(session, {1000: 42})
    out = receive(layer, RtpSender(1000).packet(FakeDaveSession.seal(42, b"\x78abc")))
    assert out == adapter.OPUS_SILENCE and layer.stats["failed"] == 1


def test_transport_failure_still_raises_for_voice_recv_to_drop() -> None:
    from nacl.exceptions import CryptoError

    layer = layer_for(FakeDaveSession({42}), {1000: 42})
    with pytest.raises(CryptoError):
        receive(layer, RtpSender(1000, key=bytes(32)).packet(b"\x78abc"))
    assert layer.stats["frames"] == 0


def test_install_dave_layer_wraps_the_instance_attribute() -> None:
    class Reader:
        decryptor = PacketDecryptor(MODE, KEY)

    reader = Reader()
    original = reader.decryptor.decrypt_rtp
    layer = adapter.install_dave_layer(reader, FakeVoiceClient({}, None))  # type: ignore[arg-type]
    assert reader.decryptor.decrypt_rtp is layer
    # update_secret_key (voice reconnect) swaps the box, not the method,
    # so the wrapped transport decrypt picks up the new key.
    reader.decryptor.update_secret_key(bytes(32))
    raw = RtpSender(1, key=bytes(32)).packet(b"\x78new-key")
    assert layer(rtp.decode_rtp(raw)) == b"\x78new-key"
    assert original.__self__ is reader.decryptor


# ── hardened decoder and sink on voice-recv's real decoder objects ──────


class Member:
    def __init__(self, uid: int, bot: bool = False) -> None:
        self.id = uid
        self.bot = bot
        self.display_name = f"m{uid}"


class Guild:
    def __init__(self, members: dict[int, Member]) -> None:
        self.members = members

    def get_member(self, uid: int) -> Member | None:
        return self.members.get(uid)


class SinkVoiceClient(FakeVoiceClient):
    def __init__(self, ssrc_to_id: dict[int, int], members: dict[int, Member]) -> None:
        super().__init__(ssrc_to_id, None)
        self.guild = Guild(members)
        self.client = None


class RecordingPipeline:
    def __init__(self) -> None:
        self.fed: list[tuple[int, int]] = []

    def feed_threadsafe(self, speaker_id: int, pcm: bytes) -> None:
        self.fed.append((speaker_id, len(pcm)))


def rtp_from(sender: RtpSender, opus: bytes) -> rtp.RTPPacket:
    packet = rtp.decode_rtp(sender.packet(opus))
    packet.decrypted_data = PacketDecryptor(MODE, KEY).decrypt_rtp(packet)
    return packet


def test_corrupt_frame_becomes_silence_instead_of_killing_the_router() -> None:
    assert opus_available(), "libopus is not installed (scripts/setup.sh installs libopus0)"
    adapter.harden_opus_decoding()
    assert adapter.harden_opus_decoding() is False  # idempotent
    pipe = RecordingPipeline()
    sink = adapter.PipelineSink(pipe)
    sink._voice_client = SinkVoiceClient({1000: 42}, {42: Member(42)})
    router = PacketRouter(sink, None)  # type: ignore[arg-type]  # never started
    decoder = router.get_decoder(1000)
    assert decoder is not None
    encoder = discord.opus.Encoder()
    good = encoder.encode(bytes(FRAME_BYTES), 960)
    sender = RtpSender(1000)
    packets = [rtp_from(sender, good), rtp_from(sender, b"\x03"), rtp_from(sender, good)]
    packets.append(rtp_from(sender, good))
    corrupt = packets[1]  # b"\x03": libopus says "corrupted stream"
    with pytest.raises(discord.opus.OpusError):
        PacketDecoder._decode_packet.__wrapped__(decoder, corrupt)  # type: ignore[attr-defined]
    before = adapter.decode_stats()["decode_errors"]
    for p in packets:
        decoder.push_packet(p)
    outputs: list[VoiceData] = []
    while (data := decoder.pop_data()) is not None:
        outputs.append(data)
        sink.write(data.source, data)
    assert adapter.decode_stats()["decode_errors"] == before + 1
    assert [len(d.pcm) for d in outputs] == [FRAME_BYTES] * 4
    assert outputs[1].pcm == adapter.SILENCE_PCM
    assert [d.packet.sequence for d in outputs] == [0, 1, 2, 3]
    assert pipe.fed == [(42, FRAME_BYTES)] * 4


def test_sink_forwards_humans_only_and_never_raises() -> None:
    class Exploding:
        def feed_threadsafe(self, speaker_id: int, pcm: bytes) -> None:
            raise RuntimeError("boom")

    pipe = RecordingPipeline()
    sink = adapter.PipelineSink(pipe)
    assert sink.wants_opus() is False
    frame = VoiceData(rtp.FakePacket(1, 1, 1), None, pcm=bytes(FRAME_BYTES))
    sink.write(Member(7), frame)
    sink.write(Member(8, bot=True), frame)
    sink.write(None, frame)
    assert pipe.fed == [(7, FRAME_BYTES)]
    assert sink.stats == {
        "frames": 3,
        "forwarded": 1,
        "dropped_bot": 1,
        "dropped_unknown": 1,
        "errors": 0,
    }
    bad = adapter.PipelineSink(Exploding())
    bad.write(Member(7), frame)
    assert bad.stats["errors"] == 1
    assert isinstance(sink, voice_recv.AudioSink)


def test_nacl_aead_is_what_voice_recv_uses() -> None:
    assert isinstance(PacketDecryptor(MODE, KEY).box, nacl.secret.Aead)
