"""What the tap and the recorder process say to each other: the frame header, its kinds, and
the limits both ends keep to.

Frames: ``<B kind><B direction><I session><Q t_ns><I length>`` + payload.
"""

from __future__ import annotations

import struct

# asyncio, subprocess and typing serve the tap's end (``RecorderProcess``), imported there: the
# recorder process, started as the tap starts, reaches its first read sooner without them
# (the process started, opened a cassette and ended on EOF: 124 -> 85 ms, medians of 11; in
# the 100 KB benchmark the tap had filled its 16 MiB bound before the recorder first read)
TYPE_CHECKING = False
if TYPE_CHECKING:
    pass


from .. import wire

_HEAD = struct.Struct("<BBIQI")
CHUNK, EOF, MESSAGE, STDERR, SYNC, CLOSE = range(6)
_DIRS = (wire.CLIENT_TO_SERVER, wire.SERVER_TO_CLIENT)
_DIR_CODE: dict[str, int] = {d: i for i, d in enumerate(_DIRS)}

DEFAULT_MAX_MESSAGE = 256 * 1024 * 1024
"""Longer messages are forwarded whole but recorded as their first this-many bytes."""
COMMIT_DELAY = 0.01
"""Seconds a trickle of messages may wait to be committed together (bounded by 2000 rows)."""
HIGH_WATER = 16 * 1024 * 1024
LOW_WATER = HIGH_WATER - 256 * 1024
"""Paused at ``HIGH_WATER``, the tap resumes once the recorder has taken 256 KiB: a pause lasts
as long as the recorder needs for that, not for megabytes. 400 pipelined 100 KB requests behind
a recorder that cannot keep up (bench_record large, 6 rounds, same run): a 4 MiB step with the
writing thread taking 8 MiB at a time -> 2 MiB and 1 MiB: p99 469 -> 135 ms, req/s 210 -> 231;
-> 256 KiB, 256 KiB and commits of 2 MiB (three runs, against the 2 MiB step in each): p99
32-40 -> 17-18 ms at the same throughput."""
END_MARK_TIMEOUT = 1.5
"""Seconds the tap waits, at its end, to mark the session as ended (for the write lock, while the
recorder commits): past that it exits all the same, inside the 2 s an SDK client gives a server
before it kills the process group; the recorder marks it too, as it reads the close."""
RULES_ENV = "MCPREC_RECORDER_RULES"
_JOIN_BELOW = 4096
"""A payload up to this size is sent joined to its header (one piece); a larger one as its own."""
_IOV = 512
"""Pieces per writev (Linux takes up to 1024)."""
MAX_BACKLOG = 32 * 1024 * 1024
"""Bytes read but not yet recorded that the recorder holds before it stops reading (then the
pipe and the tap's buffer fill, and the tap pauses at its high water mark)."""
PIPE_SIZE = 1024 * 1024
ACK_COMMITTED = b"k"
"""The recorder's answer on its stdout to a SYNC: everything sent so far is committed."""
ACK_LOST = b"L"
"""Said on its stdout once when a write to the cassette failed: messages are being lost."""
