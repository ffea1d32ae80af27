"""spl: the Python client of spl serve, the append-only, content-addressed
record log for AI agents. asyncio, standard library only::

    import spl
    client = await spl.connect()          # $SPL_URL, else the local spl
    await client.emit(act="LEARN", kind="agent.session.checkpoint",
        body={"summary": "...", "learnings": ["..."], "next_steps": "..."},
        thread=thread)
    records = await client.query_thread(thread=thread)

Every record read is verified against its stored bytes (content id and
keyed body digest; BLAKE3 in pure Python).
"""

from ._client import Client, Record, connect
from ._errors import (ConflictError, ForbiddenError, InvalidError, NotFoundError, SplError, UnauthorizedError,
                      UnavailableError)
from ._verify import CorruptRecordError, body_digest, id_of_header, verify_envelope

__all__ = ["connect", "Client", "Record", "SplError", "InvalidError", "UnauthorizedError", "ForbiddenError",
           "NotFoundError", "ConflictError", "UnavailableError", "CorruptRecordError", "verify_envelope",
           "id_of_header", "body_digest"]
