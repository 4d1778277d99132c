# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.
"""The scheduler's snapshots of the lease calendar, kept current.

:class:`SnapshotCache` keeps one
:class:`~nova_lease.scheduler.snapshot.Snapshot` per database, current
through the change journal: every request runs a cheap probe and, when
it moved, the snapshot is patched from the journal
(``snapshot_reads.refresh``). So every change -- a lease admitted or
deleted, its dates or status changed, a server linked, a reservation's
status -- is seen by the next request. The snapshot is still read again
in full when it is older than ``[nova_lease] scheduler_snapshot_ttl``
seconds (a safety net), or than half of the journal's retention
(``db_api.CHANGE_RETENTION``): in a background thread, beside the
snapshot in use, so that no request waits for it. A replaced snapshot
is taken apart a bit at a time in that thread, once no request uses it.
"""

import threading
import time

from oslo_log import log as logging
from oslo_utils import timeutils

from nova_lease.db import api as db_api
from nova_lease.scheduler import snapshot_reads

LOG = logging.getLogger(__name__)


#: Entries freed at a time when an old snapshot is taken apart.
DISMANTLE_CHUNK = 2048


def _dismantle(parts, pause=time.sleep):
    """Empty the mappings ``parts`` a few entries at a time.

    Freeing a million entries at once would hold the interpreter (every
    scheduling thread) for a good part of a second; between chunks,
    other threads run. Only for the parts of snapshots that nothing uses
    any more (see SnapshotCache._retire).
    """
    for part in parts:
        while part:
            for _n in range(DISMANTLE_CHUNK):
                if not part:
                    break
                part.popitem()
            pause(0)


#: Seconds before a failed full read is tried again; doubled after each
#: failure in a row, up to RETRY_MAX.
RETRY_FIRST = 2.0
RETRY_MAX = 120.0
#: A snapshot older than this fraction of the journal's retention is no
#: longer brought up to date (the journal rows it would need may have been
#: pruned): it is only used while the side database cannot be read.
EXPIRY_FRACTION = 0.75
#: Seconds between two warnings that the side database cannot be read.
STALE_LOG_INTERVAL = 60.0


class _Slot(object):
    """The snapshot of one database, and its full read under way."""

    def __init__(self):
        # Serialises the refreshes (journal patches) and the swap of a
        # new full read.
        self.lock = threading.Lock()
        self.snap = None
        # When snap was last found current (monotonic).
        self.current_at = None
        self.reading = None
        self.failures = 0
        self.retry_at = 0.0
        self.stale_logged_at = None


class SnapshotCache(object):
    """One :class:`Snapshot` per database, kept current (see module doc).

    Thread-safe, and no request ever waits for a full read:

    * readers take the current snapshot without a lock, after a probe;
      when the probe moved, one thread patches it from the change journal
      (milliseconds) while the others wait for its result (a stale
      snapshot would miss the change);
    * full reads (the first one, and those due by age) run in a
      background thread, beside the snapshot in use; the new snapshot is
      brought up to date with the journal and replaces the old one. A
      full read that fails keeps the old snapshot (logged; tried again
      with a back-off);
    * :meth:`get` answers None while there is no snapshot yet (the caller
      then reads what it needs for the request itself: see
      ``nova_lease.scheduler.view``);
    * when the side database cannot be read, the last snapshot is used
      as it is (a WARNING tells its age).
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._slots = {}
        self._retire_hooks = []

    def add_retire_hook(self, hook):
        """Call ``hook()`` while an old snapshot waits to be taken apart:
        it should drop what it keeps of finished requests.
        """
        self._retire_hooks.append(hook)

    def invalidate(self):
        """Forget every snapshot (a full read starts at the next call)."""
        with self._lock:
            self._slots.clear()

    def reading(self, db):
        """Whether a full read of ``db`` runs now (in the background)."""
        with self._lock:
            slot = self._slots.get(str(db.url))
            return slot is not None and slot.reading is not None

    def _slot(self, key):
        with self._lock:
            slot = self._slots.get(key)
            if slot is None:
                slot = self._slots[key] = _Slot()
            return slot

    def get(self, db, now, ttl, wait=None):
        """The snapshot of ``db``, current at the time of the call, or
        None while there is none yet.

        A full read is started in the background when there is no
        snapshot, or when it is older than ``ttl`` seconds (or than half
        of the journal's retention; ``ttl`` <= 0: as soon as the previous
        full read ended). ``wait``: seconds to wait for the first full
        read when there is no snapshot (tools and tests; the scheduler
        never waits).
        """
        slot = self._slot(str(db.url))
        snap = slot.snap
        if snap is None:
            reading = self._start_full_read(db, slot)
            if wait is None or reading is None:
                return None
            reading.join(wait)
            snap = slot.snap
            if snap is None:
                return None
        retention = db_api.CHANGE_RETENTION.total_seconds()
        age = time.monotonic() - snap.loaded_at
        if ttl <= 0 or age >= min(ttl, retention / 2):
            self._start_full_read(db, slot)
        try:
            marker = snapshot_reads.probe_all(db, snap.version[0])
        except Exception as e:
            return self._stale(slot, snap, e)
        if age >= retention * EXPIRY_FRACTION:
            return None
        if marker == (snap.version, snap.hosts_version):
            slot.current_at = time.monotonic()
            return snap
        with slot.lock:
            current = slot.snap
            if current is None:
                return None
            if current is not snap:
                # Refreshed (or read in full) meanwhile: current now?
                snap = current
                try:
                    marker = snapshot_reads.probe_all(db, snap.version[0])
                except Exception as e:
                    return self._stale(slot, snap, e)
                if marker == (snap.version, snap.hosts_version):
                    slot.current_at = time.monotonic()
                    return snap
            started = time.monotonic()
            try:
                updated = snapshot_reads.refresh(db, now, snap, marker)
            except Exception as e:
                return self._stale(slot, snap, e)
            if updated is None:
                # Not the journal it followed (a database restored or
                # recreated): nothing in it can be trusted.
                LOG.warning('nova_lease: the change journal of the lease '
                            'calendar is not the one the scheduler '
                            'followed (database restored or recreated?): '
                            'reading it in full')
                slot.snap = None
                self._start_full_read(db, slot)
                return None
            slot.snap = updated
            slot.current_at = time.monotonic()
            LOG.debug('Updated %(snap)r in %(ms).1f ms',
                      {'snap': updated,
                       'ms': (time.monotonic() - started) * 1000})
            return updated

    def _stale(self, slot, snap, error):
        """The last snapshot, when the database cannot be read."""
        now = time.monotonic()
        if slot.stale_logged_at is None or \
                now - slot.stale_logged_at >= STALE_LOG_INTERVAL:
            slot.stale_logged_at = now
            current_at = slot.current_at or snap.loaded_at
            LOG.warning('nova_lease: the side database cannot be read '
                        '(%(error)s): scheduling with the last snapshot of '
                        'the lease calendar, read %(age)d s ago, last '
                        'found current %(current)d s ago; changes made '
                        'since are not seen until it can be read again',
                        {'error': error, 'age': now - snap.loaded_at,
                         'current': now - current_at})
        return snap

    def _start_full_read(self, db, slot):
        """Start a full read of ``db`` in the background unless one is
        under way (or failed too recently); the Thread under way or None.
        """
        with self._lock:
            if slot.reading is not None:
                return slot.reading
            if time.monotonic() < slot.retry_at:
                return None
            thread = threading.Thread(
                target=self._full_read, args=(db, slot),
                name='nova_lease-calendar-read', daemon=True)
            slot.reading = thread
        thread.start()
        return thread

    def _full_read(self, db, slot):
        started = time.monotonic()
        old = None
        try:
            snap = snapshot_reads.load(db, timeutils.utcnow())
            read_ms = (time.monotonic() - started) * 1000
            with slot.lock:
                # Bring it up to date with what was committed during the
                # read (the journal was read first).
                marker = snapshot_reads.probe_all(db, snap.version[0])
                if marker != (snap.version, snap.hosts_version):
                    snap = snapshot_reads.refresh(
                        db, timeutils.utcnow(), snap, marker) or snap
                old = slot.snap
                slot.snap = snap
                slot.current_at = time.monotonic()
            slot.failures = 0
            slot.stale_logged_at = None
            LOG.info('nova_lease: read the lease calendar in full: '
                     '%(snap)r in %(ms).0f ms',
                     {'snap': snap, 'ms': read_ms})
        except Exception:
            slot.failures += 1
            delay = min(RETRY_FIRST * 2 ** (slot.failures - 1), RETRY_MAX)
            slot.retry_at = time.monotonic() + delay
            old = slot.snap
            if old is None:
                kept = ('no snapshot yet: requests are answered from '
                        'per-request reads of their hosts\' promises, '
                        'or refused when the database cannot be read')
            else:
                kept = ('keeping the snapshot read %d s ago' %
                        (time.monotonic() - old.loaded_at))
            LOG.exception('nova_lease: the full read of the lease calendar '
                          'failed (%(failures)d in a row; next try in '
                          '%(delay)d s); %(kept)s',
                          {'failures': slot.failures, 'delay': delay,
                           'kept': kept})
        finally:
            with self._lock:
                slot.reading = None
        if old is not None:
            family, parts = old.family, old.parts()
            del old
            self._retire(family, parts)

    def _retire(self, family, parts):
        """Take a replaced snapshot apart in this (background) thread, a
        bit at a time (see :func:`_dismantle`), once no request uses any
        snapshot of its ``family`` (``parts``: its big mappings). If they
        take longer than RETIRE_WAIT, their last user frees them.
        """
        deadline = time.monotonic() + RETIRE_WAIT
        while True:
            for hook in self._retire_hooks:
                hook()
            if not len(family.versions):
                break
            if time.monotonic() >= deadline:
                return
            time.sleep(RETIRE_POLL)
        _dismantle(parts)


#: Longest wait, in seconds, for the requests that use a replaced
#: snapshot before it is taken apart; polled every RETIRE_POLL seconds.
RETIRE_WAIT = 60.0
RETIRE_POLL = 0.1

CACHE = SnapshotCache()
