"""The one module that touches discord.py's voice internals, voice-recv and davey.

discord.py 2.7 only sends audio; ``discord-ext-voice-recv`` 0.5.2a179
receives, but predates DAVE (mandatory end-to-end encryption since March
2026) and lets one corrupt Opus frame kill its router thread. This module
adds, around voice-recv's private hooks:

* ``DaveLayer`` — after voice-recv's transport decrypt, decrypts the DAVE
  layer with the ``DaveSession`` discord.py already maintains for sending.
  Non-Opus RTP (camera, screen share), senders whose SSRC is not mapped to
  a user yet, and undecryptable frames become Opus silence, never garbage
  for the decoder;
* ``harden_opus_decoding()`` — a frame libopus rejects becomes 20 ms of
  silence instead of an exception that stops receiving for everyone;
* ``PipelineSink`` — forwards ``(user.id, pcm)`` of human speakers;
* ``DaveRecvClient`` — a ``VoiceRecvClient`` whose ``listen`` installs both.

Everything else in ``bot.voice`` sees only ``feed_threadsafe(speaker_id, pcm)``.
``check_receive_internals()`` lists what moved after an upgrade; the
contract test and ``VoiceManager.join`` both call it, so a broken upgrade
fails loudly instead of recording garbage.
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
from collections.abc import Callable
from importlib import metadata
from typing import Any, Protocol

import davey
import discord
from discord.ext import voice_recv
from discord.ext.voice_recv import rtp as vr_rtp
from discord.ext.voice_recv.opus import PacketDecoder, VoiceData
from discord.ext.voice_recv.reader import AudioReader, PacketDecryptor
from discord.ext.voice_recv.router import PacketRouter
from discord.opus import OpusError
from discord.voice_state import VoiceConnectionState

from bot.voice.types import FRAME_BYTES

log = logging.getLogger(__name__)

OPUS_PAYLOAD_TYPE = 120  # Discord's dynamic RTP payload type for Opus audio
OPUS_SILENCE: bytes = vr_rtp.OPUS_SILENCE  # b"\xf8\xff\xfe"
DAVE_MAGIC = b"\xfa\xfa"  # trailer of every DAVE-encrypted frame
SILENCE_PCM = bytes(FRAME_BYTES)

# The versions whose private internals this module was written against.
VERIFIED_VERSIONS: dict[str, str] = {
    "discord.py": "2.7.1",
    "discord-ext-voice-recv": "0.5.2a179",
    "davey": "0.1.7",
}


class FeedTarget(Protocol):
    def feed_threadsafe(self, speaker_id: int, pcm: bytes) -> None: ...


class DaveLayer:
    """Wraps ``PacketDecryptor.decrypt_rtp``: transport decrypt, then DAVE.

    Runs on discord.py's socket-reader thread, once per received packet.
    Counters are plain ints written by that thread only; readers get a copy.
    """

    def __init__(self, voice_client: Any, transport_decrypt: Callable[[Any], bytes]) -> None:
        self._vc = voice_client
        self._transport = transport_decrypt
        self._lock = threading.Lock()
        self._stats: dict[str, int] = {
            "frames": 0,
            "dave_ok": 0,
            "plain": 0,
            "no_user": 0,
            "failed": 0,
            "not_audio": 0,
        }

    @property
    def stats(self) -> dict[str, int]:
        with self._lock:
            return dict(self._stats)

    def _bump(self, key: str) -> int:
        with self._lock:
            self._stats[key] += 1
            return self._stats[key]

    def __call__(self, packet: Any) -> bytes:
        # Transport (AEAD) failures raise CryptoError, which voice-recv's
        # reader already logs and drops; nothing to add here.
        data = bytes(self._transport(packet))
        self._bump("frames")
        if packet.payload != OPUS_PAYLOAD_TYPE:
            # Video/RTX on an audio socket (discord-ext-voice-recv issue #49 on
            # GitHub): silence never reaches a decoder for an unknown SSRC, and
            # does no harm for a known one.
            self._bump("not_audio")
            return OPUS_SILENCE
        session = getattr(self._vc._connection, "dave_session", None)
        if session is None or data == OPUS_SILENCE:
            # No E2EE negotiated (stage channels), or the silence frame,
            # which DAVE leaves unencrypted.
            self._bump("plain")
            return data
        user_id = self._vc._get_id_from_ssrc(packet.ssrc)
        if user_id is None:
            # SPEAKING (op 5) has not mapped this SSRC yet: without the
            # sender's id there is no key, so the frame cannot be read.
            self._bump("no_user")
            return OPUS_SILENCE
        try:
            out = session.decrypt(int(user_id), davey.MediaType.audio, data)
        except Exception as exc:
            if not data.endswith(DAVE_MAGIC) and "Unencrypted" in str(exc):
                # Sender in a passthrough transition: the frame was never
                # E2E-encrypted, so it is already plain Opus.
                self._bump("plain")
                return data
            n = self._bump("failed")
            if n == 1 or n % 500 == 0:
                log.warning("DAVE decrypt failed (%d so far), last: %s", n, exc)
            return OPUS_SILENCE
        self._bump("dave_ok")
        return bytes(out)


# Process-wide, because the hardening patches voice-recv's class.
_decode_stats: dict[str, int] = {"decode_errors": 0}
_decode_lock = threading.Lock()
_HARDENED = "__guildlore_hardened__"


def decode_stats() -> dict[str, int]:
    with _decode_lock:
        return dict(_decode_stats)


def harden_opus_decoding() -> bool:
    """Make ``PacketDecoder._decode_packet`` turn a failing frame into silence.

    Without this, ``OpusError: corrupted stream`` escapes
    ``PacketRouter.run`` and stops receiving for every speaker
    (discord-ext-voice-recv GitHub issues #43, #49, #57). Idempotent; returns True when it patched.
    """
    original = PacketDecoder._decode_packet
    if getattr(original, _HARDENED, False):
        return False

    @functools.wraps(original)
    def _decode_packet(self: PacketDecoder, packet: Any) -> tuple[Any, bytes]:
        try:
            return original(self, packet)
        except Exception as exc:  # OpusError, or a destroyed decoder (None)
            with _decode_lock:
                _decode_stats["decode_errors"] += 1
                n = _decode_stats["decode_errors"]
            if n == 1 or n % 500 == 0:
                log.warning(
                    "opus decode failed for ssrc %s (%d so far): %s: %s",
                    getattr(self, "ssrc", "?"),
                    n,
                    type(exc).__name__,
                    exc,
                )
            return packet, SILENCE_PCM

    setattr(_decode_packet, _HARDENED, True)
    PacketDecoder._decode_packet = _decode_packet  # type: ignore[method-assign]
    return True


class PipelineSink(voice_recv.AudioSink):
    """Decoded 48 kHz stereo PCM of human speakers → ``pipeline.feed_threadsafe``.

    ``write`` runs on voice-recv's router thread; it must never raise, or
    the router stops for everyone.
    """

    def __init__(self, pipeline: FeedTarget) -> None:
        super().__init__()
        self._pipeline = pipeline
        self.stats: dict[str, int] = {
            "frames": 0,
            "forwarded": 0,
            "dropped_bot": 0,
            "dropped_unknown": 0,
            "errors": 0,
        }

    def wants_opus(self) -> bool:
        return False  # voice-recv decodes to PCM (with our hardened decoder)

    def write(self, user: Any, data: VoiceData) -> None:
        self.stats["frames"] += 1
        try:
            if user is None:
                self.stats["dropped_unknown"] += 1
            elif getattr(user, "bot", False):
                self.stats["dropped_bot"] += 1
            elif data.pcm:
                self._pipeline.feed_threadsafe(int(user.id), data.pcm)
                self.stats["forwarded"] += 1
        except Exception:
            self.stats["errors"] += 1
            log.exception("voice sink failed to forward a frame")

    def cleanup(self) -> None:
        """The pipeline is closed by its owner, not by voice-recv's reader."""


def install_dave_layer(reader: AudioReader, voice_client: Any) -> DaveLayer:
    """Wrap ``reader.decryptor.decrypt_rtp`` (an instance attribute) with DAVE."""
    layer = DaveLayer(voice_client, reader.decryptor.decrypt_rtp)
    reader.decryptor.decrypt_rtp = layer
    return layer


def build_reader(
    sink: voice_recv.AudioSink,
    voice_client: Any,
    *,
    after: Callable[[Exception | None], Any] | None = None,
) -> tuple[AudioReader, DaveLayer]:
    """An ``AudioReader`` with the DAVE layer and the hardened decoder, not started.

    The layer is installed before ``start()`` registers the socket
    listener, so not a single packet skips it.
    """
    harden_opus_decoding()
    reader = AudioReader(sink, voice_client, after=after)
    return reader, install_dave_layer(reader, voice_client)


class DaveRecvClient(voice_recv.VoiceRecvClient):
    """Pass as ``channel.connect(cls=DaveRecvClient)``."""

    def __init__(self, client: discord.Client, channel: Any) -> None:
        super().__init__(client, channel)
        self.dave_layer: DaveLayer | None = None

    def listen(
        self,
        sink: voice_recv.AudioSink,
        *,
        after: Callable[[Exception | None], Any] | None = None,
    ) -> None:
        # Same checks as VoiceRecvClient.listen, which cannot be reused
        # because it starts the reader before we could wrap its decryptor.
        if not self.is_connected():
            raise discord.ClientException("Not connected to voice.")
        if not isinstance(sink, voice_recv.AudioSink):
            raise TypeError(f"sink must be an AudioSink not {type(sink).__name__}")
        if self.is_listening():
            raise discord.ClientException("Already receiving audio.")
        reader, self.dave_layer = build_reader(sink, self, after=after)
        self._reader = reader
        reader.start()

    def receive_stats(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.dave_layer.stats) if self.dave_layer else {}
        out.update(decode_stats())
        session = getattr(self._connection, "dave_session", None)
        out["dave_ready"] = bool(session is not None and session.ready)
        out["dave_protocol_version"] = getattr(self._connection, "dave_protocol_version", 0)
        return out


def _has_params(func: Any, *names: str) -> bool:
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False
    return all(n in params for n in names)


def _source_has(obj: Any, *snippets: str) -> bool:
    try:
        src = inspect.getsource(obj)
    except (OSError, TypeError):
        return False
    return all(s in src for s in snippets)


def installed_versions() -> dict[str, str]:
    out: dict[str, str] = {}
    for dist in VERIFIED_VERSIONS:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "missing"
    return out


def check_receive_internals() -> list[str]:
    """Everything this adapter assumes about private internals; returns what broke.

    Checked by name, signature and (where an attribute only exists on
    instances) by the constructor's source, without opening sockets.
    """
    problems: list[str] = []

    def need(ok: bool, what: str) -> None:
        if not ok:
            problems.append(what)

    # discord.py: the DAVE session lives on the connection state.
    need(
        _source_has(VoiceConnectionState.__init__, "self.dave_session"),
        "discord.voice_state.VoiceConnectionState no longer sets self.dave_session",
    )
    need(
        _source_has(VoiceConnectionState.__init__, "self.dave_protocol_version"),
        "VoiceConnectionState no longer sets self.dave_protocol_version",
    )
    for name in ("add_socket_listener", "remove_socket_listener"):
        need(
            _has_params(getattr(VoiceConnectionState, name, None), "callback"),
            f"VoiceConnectionState.{name}(callback) moved",
        )
    need(
        _source_has(discord.VoiceClient.__init__, "self._connection"),
        "discord.VoiceClient no longer keeps its state in self._connection",
    )
    need(
        hasattr(discord.opus, "OpusError") and OpusError is discord.opus.OpusError,
        "discord.opus.OpusError moved",
    )
    need(
        _has_params(discord.opus.Decoder.decode, "data", "fec"),
        "discord.opus.Decoder.decode(data, *, fec) changed",
    )
    # voice-recv: client, reader, decryptor, decoder, router, sink, packets.
    vrc = voice_recv.VoiceRecvClient
    need(issubclass(vrc, discord.VoiceClient), "VoiceRecvClient is no VoiceClient")
    need(_has_params(vrc.listen, "sink", "after"), "VoiceRecvClient.listen(sink, *, after) changed")
    need(_has_params(vrc._get_id_from_ssrc, "ssrc"), "VoiceRecvClient._get_id_from_ssrc moved")
    need(
        _source_has(vrc.__init__, "self._reader", "self._ssrc_to_id"),
        "VoiceRecvClient no longer has _reader/_ssrc_to_id",
    )
    for name in ("is_listening", "stop_listening", "is_connected"):
        need(callable(getattr(vrc, name, None)), f"VoiceRecvClient.{name} moved")
    need(
        _has_params(AudioReader.__init__, "sink", "voice_client", "after"),
        "AudioReader(sink, voice_client, *, after) changed",
    )
    need(
        _source_has(AudioReader.__init__, "self.decryptor", "PacketDecryptor("),
        "AudioReader no longer builds self.decryptor = PacketDecryptor(...)",
    )
    need(
        _source_has(AudioReader.callback, "self.decryptor.decrypt_rtp(packet)"),
        "AudioReader.callback no longer calls self.decryptor.decrypt_rtp(packet)",
    )
    need(
        _source_has(AudioReader.start, "add_socket_listener(self.callback)"),
        "AudioReader.start no longer registers self.callback as socket listener",
    )
    need(
        _source_has(PacketDecryptor.__init__, "self.decrypt_rtp"),
        "PacketDecryptor no longer sets the decrypt_rtp instance attribute",
    )
    need(
        callable(getattr(PacketDecryptor, "_decrypt_rtp_aead_xchacha20_poly1305_rtpsize", None)),
        "PacketDecryptor lost aead_xchacha20_poly1305_rtpsize",
    )
    need(
        _has_params(PacketDecoder._decode_packet, "packet"),
        "PacketDecoder._decode_packet(packet) moved",
    )
    need(
        _source_has(PacketDecoder._process_packet, "self._decode_packet(packet)"),
        "PacketDecoder._process_packet no longer calls self._decode_packet",
    )
    need(
        _source_has(PacketRouter._do_run, "self.sink.write(data.source, data)"),
        "PacketRouter no longer calls sink.write(source, data)",
    )
    need(
        _has_params(VoiceData.__init__, "packet", "source", "pcm"),
        "VoiceData(packet, source, *, pcm) changed",
    )
    need(
        {"wants_opus", "write", "cleanup"} <= set(voice_recv.AudioSink.__abstractmethods__),
        "AudioSink's abstract interface changed",
    )
    need(OPUS_SILENCE == b"\xf8\xff\xfe", "voice_recv.rtp.OPUS_SILENCE changed")
    need(
        {"payload", "ssrc", "decrypted_data"} <= set(vr_rtp.RTPPacket.__slots__),
        "RTPPacket lost payload/ssrc/decrypted_data",
    )
    # davey: the decrypt call and the enum.
    need(hasattr(davey, "MediaType") and hasattr(davey.MediaType, "audio"), "davey.MediaType.audio")
    need(
        _has_params(davey.DaveSession.decrypt, "user_id", "media_type", "packet"),
        "davey.DaveSession.decrypt(user_id, media_type, packet) changed",
    )
    need(hasattr(davey.DaveSession, "ready"), "davey.DaveSession.ready moved")
    return problems
