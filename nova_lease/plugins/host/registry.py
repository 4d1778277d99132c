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
"""The host registry (physical:host): the reservable hosts, cached.

:func:`register_host` and :func:`unregister_host` record and remove a
reservable host (``os-hosts``), under the host's lock so that no
allocation can promise it meanwhile.

Every allocation needs every registered host with its capabilities
(1,000 hosts: several thousand rows, most of the cost of an allocation).
The registry changes rarely, so each process keeps a copy
(:func:`read_registry`, :func:`cached_registry`), checked in every
allocation transaction against the registry's generation, a row that
every host writer of nova_lease.db.api moves in its transaction
(db.api.host_fingerprint). Changes made by this process also bump a
local generation (:func:`invalidate_host_cache`). A copy found stale is
brought up to date host by host: only the hosts whose version changed
are read again. The hosts of a copy
that match a request, best first, are memoised too
(:func:`matching_hosts`).
"""

import threading

from oslo_serialization import jsonutils

from nova_lease.db import api as db_api
from nova_lease import exception
from nova_lease.plugins.host import matching


class HostHavingAllocations(exception.Conflict):
    msg_fmt = ('host %(host)s holds capacity promised to %(count)d '
               'reservation(s) that have not ended (leases %(leases)s): '
               'a registered host is leased whole, so it cannot be '
               'registered before they end or are deleted')


_CACHE_LOCK = threading.Lock()
_HOST_CACHE = {}
_GENERATION = [0]
# The rows last read per database, by host id (never cleared: each read
# compares them with the hosts' versions).
_LAST_READ = {}


def invalidate_host_cache():
    """Forget the cached host registry (after registering a host...)."""
    with _CACHE_LOCK:
        _GENERATION[0] += 1
        _HOST_CACHE.clear()


def cached_registry(session):
    """(host rows, fingerprint) as last read by this process, or None."""
    with _CACHE_LOCK:
        cached = _HOST_CACHE.get(str(db_api.url_of(session)))
        if cached is not None and cached[0] == _GENERATION[0]:
            return cached[1:]
    return None


def read_registry(session):
    """(host rows, fingerprint) read in session's transaction, and kept.

    Only the hosts written since this process last read the registry are
    read again (with their capabilities, and their facts worked out): the
    others are known by their versions (db.api.host_versions), one small
    row each. The first allocation after an operator changed one host of
    a thousand so costs about what a cached one does.
    """
    key = str(db_api.url_of(session))
    with _CACHE_LOCK:
        generation = _GENERATION[0]
        known = _LAST_READ.get(key, {})
    fingerprint = db_api.host_fingerprint(session)
    versions = db_api.host_versions(session, reservable=True)
    changed = [host_id for host_id, version in versions.items()
               if host_id not in known or
               known[host_id]['_version'] != version]
    by_id = {host_id: known[host_id] for host_id in versions
             if host_id in known}
    if changed:
        # (Most of them, e.g. at the first read: all, without a list.)
        ids = None if 2 * len(changed) > len(versions) else changed
        for row in db_api.host_list(session, reservable=True, ids=ids):
            row['_facts'] = matching.host_facts(row)
            # The version read before the row: a write in between (READ
            # COMMITTED) only has the host read again next time.
            row['_version'] = versions.get(row['id'])
            by_id[row['id']] = row
    rows = sorted(by_id.values(), key=lambda h: h['hypervisor_hostname'])
    with _CACHE_LOCK:
        # Whatever the local generation: the versions tell what changed.
        _LAST_READ[key] = by_id
        if _GENERATION[0] == generation:
            _HOST_CACHE[key] = (generation, rows, fingerprint)
    return rows, fingerprint


def _size_key(host):
    # Smallest hosts first, so that big hosts stay free for big requests.
    return (host.get('vcpus') or 0, host.get('memory_mb') or 0,
            host.get('local_gb') or 0, host['hypervisor_hostname'])


_MATCH_CACHE_SIZE = 64


def matching_hosts(hosts, request):
    """Hosts matching request, best first (memoised per host snapshot)."""
    key = (id(hosts), jsonutils.dumps(request.properties(), sort_keys=True))
    with _CACHE_LOCK:
        found = _MATCH_CACHE.get(key)
    if found is not None and found[0] is hosts:
        return found[1]
    request_key = key[1]
    matched = []
    for host in hosts:
        # Each host row remembers its answers: a copy brought up to date
        # host by host (read_registry) keeps the rows that did not
        # change, so only the hosts read again are matched again.
        answers = host.get('_matches')
        if answers is None or len(answers) >= _MATCH_CACHE_SIZE:
            answers = host['_matches'] = {}
        found = answers.get(request_key)
        if found is None:
            found = answers[request_key] = matching.host_matches(host,
                                                                 request)
        if found:
            matched.append(host)
    matched.sort(key=_size_key)
    with _CACHE_LOCK:
        if len(_MATCH_CACHE) >= _MATCH_CACHE_SIZE:
            _MATCH_CACHE.clear()
        # Keep a reference to hosts, so that its id is not reused.
        _MATCH_CACHE[key] = (hosts, matched)
    return matched


_MATCH_CACHE = {}


@db_api.retry_on_deadlock
def register_host(db, values, now):
    """Record a reservable host, unless allocations still hold it.

    One writer transaction under the host's lock (``db.api.lock_hosts``,
    the lock admission control and host allocation take before they
    promise a host): an allocation on the host that ends after ``now``
    (an instance lease admitted there, or anything left of an earlier
    registration) refuses the registration, and no admission can promise
    the host between the check and the insert.

    :param values: the hosts-table columns (``hypervisor_hostname``...)
        and ``capabilities``.
    :returns: the host dict (as ``db.api.host_get``).
    :raises HostHavingAllocations: (409) naming the leases.
    :raises nova_lease.db.api.HostExists: (409) registered already.
    """
    name = values['hypervisor_hostname']
    with db.writer() as session:
        db_api.lock_hosts(session, [name])
        held = db_api.allocation_list(session, hosts=[name], start=now)
        if held:
            rids = sorted({a['reservation_id'] for a in held})
            leases = sorted({db_api.reservation_get(session, rid)[
                'lease_id'] for rid in rids})
            raise HostHavingAllocations(host=name, count=len(rids),
                                        leases=', '.join(leases))
        return db_api.host_create(session, values)


def unregister_host(db, host, now):
    """Undo :func:`register_host` unless an allocation holds the host now.

    Returns True if the host row was removed.
    """
    name = host['hypervisor_hostname']
    with db.writer() as session:
        db_api.lock_hosts(session, [name])
        if db_api.allocation_list(session, hosts=[name], start=now):
            return False
        db_api.host_destroy(session, host['id'])
        return True
