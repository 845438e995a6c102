"""A member who opted out of memory (``/memory opt-out``) is not transcribed
either: the voice receiver asks the engine's opt-outs (``known_out``, from
its own thread) before a frame is queued, so their audio never reaches the
speech-to-text endpoint — not only their transcript is refused at admission."""

from __future__ import annotations

from typing import Any

from memory.engine import Memory
from tests.voice.test_voice_service import (
    GUILD,
    FakeVoiceChannel,
    Store,
    VirtualClock,
    make_guild,
    make_manager,
    say,
)


async def test_memory_opt_out_silences_the_voice_receiver(make_memory: Any) -> None:
    mem: Memory = await make_memory(embeddings="none")
    assert await mem.opt_outs.change(str(GUILD), "2", True)
    clock = VirtualClock()
    channel = FakeVoiceChannel(20, make_guild(), [])
    manager, ingested = make_manager(Store(), clock, memory_opted_out=mem.opt_outs.known_out)
    session = await manager.join(channel)
    sink = channel.vc.sink  # type: ignore[union-attr]
    guild = channel.guild
    say(sink, guild.get_member(1), 30, clock)  # type: ignore[arg-type]
    say(sink, guild.get_member(2), 30, clock)  # type: ignore[arg-type]
    assert session.pipeline.stats["dropped_opted_out"] == 30
    await manager.leave(GUILD)
    assert [m.author_id for m in ingested] == ["1"]
    # Opting back in is seen at once.
    assert await mem.opt_outs.change(str(GUILD), "2", False)
    assert not manager.is_opted_out(GUILD, 2)
    await manager.close()
