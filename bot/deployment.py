"""What the privacy notice says about this deployment (``memory.Deployment``),
from the process's settings: the database kind, which model endpoints
receive data (by host), and whether voice can be transcribed. The bot's
``/memory privacy`` and the dashboard's ``/privacy`` both take it from here,
so they describe the same process."""

from __future__ import annotations

from dataclasses import replace

from bot.settings import Settings
from dashboard.config import DashboardConfig
from memory import Deployment, deployment_of


def deployment(settings: Settings) -> Deployment:
    # Voice is offered when it is on and something can transcribe it.
    local = settings.voice_stt == "local"
    voice = settings.voice_enabled and (local or settings.voice_stt_config().enabled)
    return deployment_of(
        settings.memory_config(),
        chat=settings.llm_config().enabled,
        llm_extraction=settings.use_llm_extractor,
        voice=voice,
        stt_base_url=settings.voice_stt_base_url,
        stt_remote=not local,
    )


def dashboard_config(settings: Settings) -> DashboardConfig:
    """``settings.dashboard_config()`` with the deployment its privacy page describes."""
    return replace(settings.dashboard_config(), deployment=deployment(settings))
