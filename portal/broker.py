"""The embedded default's task broker: kombu's filesystem transport, made safe to share.

``make run`` needs a broker with no server, shared by the web server (which enqueues on
commit), beat, the watcher and the worker. kombu's filesystem transport is that, but as
shipped (kombu 5.6) it has two faults that stopped the whole product under ordinary load
(issue 16; kombu issue #1551, open):

* ``_put`` creates the message file under its final name and writes it afterwards, and
  ``_get`` takes files without the writer's lock. A worker polling at the wrong moment
  takes an empty or half-written file, and ``json.loads`` raises in the consumer's loop,
  which kills the worker.
* any unreadable message (empty, truncated, not JSON, not a kombu envelope) raises in the
  same place, so one bad file stops every later task.

This subclass fixes both without changing the folder layout or the message format:

* a message is written to ``tmp/`` beside the queue folder and renamed into it, so a
  reader sees a whole file or none (``rename`` is atomic on one file system);
* a reader claims a file by renaming it into ``processed/`` (only one consumer wins),
  and a file it cannot read as a kombu message is moved to ``rejected/``, logged, and
  skipped: the worker goes on with the next message;
* the exchange tables (``control/``, used by broadcast) are replaced atomically under a
  lock file and an unreadable one counts as empty.

Selected in ``portal/settings.py`` with ``CELERY_BROKER_TRANSPORT`` whenever the broker
URL is ``filesystem://``. Production uses Redis and never loads this module.
"""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path
from queue import Empty
from time import monotonic_ns
from typing import Any

from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads
from kombu.utils.objects import cached_property

logger = logging.getLogger(__name__)

__all__ = ["Channel", "Transport"]


def _write_atomically(path: Path, data: bytes, tmp_dir: Path) -> None:
    """Write ``data`` to ``path`` so that no reader ever sees a partial file."""
    tmp = tmp_dir / f"{uuid.uuid4().hex}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


class Channel(filesystem.Channel):
    """A filesystem channel with atomic writes and readers that skip bad messages."""

    @cached_property
    def tmp_folder(self) -> Path:
        folder = Path(self.transport_options.get(
            "tmp_folder", Path(self.data_folder_out).parent / "tmp"))
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    @cached_property
    def rejected_folder(self) -> Path:
        folder = Path(self.transport_options.get(
            "rejected_folder", Path(self.data_folder_in).parent / "rejected"))
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    @cached_property
    def claim_folder(self) -> Path:
        folder = Path(self.processed_folder)
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    # --- messages ---------------------------------------------------------------------
    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:
        # Zero-padded nanoseconds: names sort in the order they were written (kombu's
        # milliseconds, unpadded, tie within a millisecond and misorder across digit counts).
        name = f"{monotonic_ns():020d}_{uuid.uuid4()}.{queue}.msg"
        try:
            _write_atomically(Path(self.data_folder_out) / name,
                              str_to_bytes(dumps(payload)), self.tmp_folder)
        except OSError as exc:
            raise filesystem.ChannelError(
                f"Cannot add file {name!r} to {self.data_folder_out}") from exc

    def _get(self, queue: str) -> Any:
        suffix = f".{queue}.msg"
        folder = Path(self.data_folder_in)
        for name in sorted(os.listdir(folder)):
            if not name.endswith(suffix):
                continue
            claimed = self.claim_folder / name
            try:
                os.rename(folder / name, claimed)
            except OSError:
                continue  # another consumer took it
            try:
                raw = claimed.read_bytes()
            except OSError as exc:
                raise filesystem.ChannelError(f"Cannot read file {claimed}") from exc
            try:
                payload = loads(bytes_to_str(raw))
                self.Message(payload, channel=self)  # the envelope a consumer needs
            except Exception as exc:  # any unreadable message is skipped
                self._reject_file(claimed, queue, raw, exc)
                continue
            if not self.store_processed:
                claimed.unlink(missing_ok=True)
            return payload
        raise Empty()

    def _reject_file(self, path: Path, queue: str, raw: bytes, exc: Exception) -> None:
        target = self.rejected_folder / path.name
        try:
            os.replace(path, target)
        except OSError:
            path.unlink(missing_ok=True)
            target = path
        logger.error("Skipped an unreadable message on queue %r (%d bytes: %s); moved to %s",
                     queue, len(raw), exc, target)

    # --- exchange tables (broadcast) -------------------------------------------------------
    def get_table(self, exchange: str) -> list:
        file = self.control_folder / f"{exchange}.exchange"
        try:
            table = loads(bytes_to_str(file.read_bytes()))
            return [filesystem.exchange_queue_t(*q) for q in table]
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise filesystem.ChannelError(f"Cannot open {file}") from exc
        except Exception as exc:  # a damaged table: the next bind rebuilds it
            logger.error("Ignored the unreadable exchange table %s: %s", file, exc)
            return []

    def _queue_bind(self, exchange: str, routing_key: str, pattern: str, queue: str) -> None:
        self.control_folder.mkdir(parents=True, exist_ok=True)
        file = self.control_folder / f"{exchange}.exchange"
        entry = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        with open(self.control_folder / f"{exchange}.lock", "wb") as lock_file:
            filesystem.lock(lock_file, filesystem.LOCK_EX)
            try:
                queues = self.get_table(exchange)
                if entry not in queues:
                    queues.insert(0, entry)
                    _write_atomically(file, str_to_bytes(dumps(queues)), self.tmp_folder)
            finally:
                filesystem.unlock(lock_file)


class Transport(filesystem.Transport):
    """kombu's filesystem transport with :class:`Channel`."""

    Channel = Channel
