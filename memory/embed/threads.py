"""CPU priority of the background embedding thread."""

from __future__ import annotations

import contextlib
import os
import sys
import threading

# Background embedding runs this much "nicer" than the rest of the process: on
# a small machine the local model would otherwise take every core from the
# event loop and the database writer, and acknowledgements would wait on it.
BACKGROUND_NICE = 10


def lower_thread_priority() -> None:
    """Thread initializer: lower this thread's CPU priority (Linux: per thread;
    threads it starts, such as onnxruntime's pool, inherit it)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + BACKGROUND_NICE)
