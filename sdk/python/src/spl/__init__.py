"""spl: the Python client of spl serve, the append-only, content-addressed
record log for AI agents. asyncio, standard library only::

    import spl
    client = await spl.connect()          # $SPL_URL, else the local spl
    await client.emit(act="LEARN", kind="agent.session.checkpoint",
        body={"summary": "...", "learnings": ["..."], "next_steps": "..."},
        thread=thread)
    records = await client.query_thread(thread=thread)

Durable agent runs (checkpoints write-behind, tool effects recorded once
and replayed on resume)::

    async with client.run("r1", thread=thread) as run:
        if run.status == "terminal":
            return run.terminal_result
        await run.checkpoint("step_started", {"step": 1, "messages": []})
        out = await run.effect("call-0", "search", {"q": "x"}, lambda: search("x"))
        await run.finish({"final_text": "..."})

A run may wait for a person's signal (run.await_signal, raising
StillWaitingError when it has not come: the process may end) that someone
sends with client.signal_run(run_id, "approval", data={...}).

Every record read is verified against its stored bytes (content id and
keyed body digest; BLAKE3 in pure Python).
"""

from ._client import Client, Record, connect
from ._errors import (ConflictError, DiskFullError, EffectMismatchError, ForbiddenError, InvalidError, NotFoundError, RunCancelledError,
                      RunFinishedError, RunNotWaitingError, SplError, StillWaitingError, UnauthorizedError,
                      UnavailableError, UnlandedError)
from ._run import EffectResult, FinishReport, RecordedEffect, Run, RunCheckpoint, RunHandle, RunSignal, RunStats
from ._verify import CorruptRecordError, body_digest, id_of_header, verify_envelope

__all__ = ["connect", "Client", "Record", "SplError", "InvalidError", "UnauthorizedError", "ForbiddenError",
           "NotFoundError", "ConflictError", "UnavailableError", "DiskFullError", "CorruptRecordError", "verify_envelope",
           "id_of_header", "body_digest", "Run", "RunHandle", "RunCheckpoint", "RecordedEffect", "EffectResult",
           "RunStats", "FinishReport", "RunCancelledError", "RunFinishedError", "EffectMismatchError", "UnlandedError",
           "RunSignal", "RunNotWaitingError", "StillWaitingError"]
