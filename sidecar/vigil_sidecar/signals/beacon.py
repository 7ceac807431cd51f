"""The beacon protocol: one small JSON object per poll, sent by the app to its sidecar on loopback.

The same bytes travel as a UDP datagram (fire-and-forget: the app never waits) or as the body of
`POST /v1/beacon`. Fields (unknown ones are ignored, so newer apps work with older sidecars):

    {"member_id": "orders-0-5f0c...", "generation": 7, "instance_id": "orders-0", "assigned": 2, "time": 1763.5,
     "process": "9f1c..."}

`generation` is -1 when the app cannot tell (the watchdog then never uses it for a heartbeat). `process` (optional)
is the sending process's token, the same its helper connection (`POST /v1/hold`) names: it binds that connection's
close, the proof the process ended, to the member the process reported (two consumer processes in one pod).
"""

import json
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vigil_core.settings import describe_validation_error
from vigil_sidecar.watchdog.state import Beacon

MAX_BEACON_BYTES = 2048


class BeaconError(ValueError):
    """A beacon that cannot be used; the message is one line naming the field."""


class _Message(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    member_id: Annotated[str, Field(min_length=1, max_length=512)]
    generation: int = -1
    instance_id: Annotated[str, Field(max_length=512)] | None = None
    assigned: Annotated[int, Field(ge=0)] = 0
    time: float
    process: Annotated[str, Field(min_length=1, max_length=64)] | None = None


def parse_beacon(data: bytes) -> Beacon:
    """Validate one beacon; BeaconError (one line) for anything malformed."""
    if len(data) > MAX_BEACON_BYTES:
        raise BeaconError(f"beacon: {len(data)} bytes, at most {MAX_BEACON_BYTES}")
    try:
        raw = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BeaconError(f"beacon: not JSON ({exc.__class__.__name__})") from None
    if not isinstance(raw, dict):
        raise BeaconError(f"beacon: expected a JSON object, got {type(raw).__name__}")
    try:
        msg = _Message.model_validate(raw)
    except ValidationError as exc:
        raise BeaconError(f"beacon {describe_validation_error(exc)}") from None
    return Beacon(
        member_id=msg.member_id,
        generation=msg.generation,
        instance_id=msg.instance_id or None,
        assigned_partitions=msg.assigned,
        app_time=msg.time,
        process=msg.process,
    )


def encode_beacon(
    member_id: str, generation: int, instance_id: str | None, assigned: int, time: float, *, process: str | None = None
) -> bytes:
    """The bytes an app sends (the helper uses this; other languages follow the README's protocol)."""
    fields = {"member_id": member_id, "generation": generation, "instance_id": instance_id, "assigned": assigned,
              "time": time}  # fmt: skip
    return json.dumps(fields | ({} if process is None else {"process": process}), separators=(",", ":")).encode()
