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
"""What an event's action came to, as the engine records it (pure).

:func:`success` and :func:`failure` turn a finished action into the
result that ``db.api.engine_complete_events`` writes (the event's status,
the lease's and its reservations' next status with the statuses they are
expected in, the ``status_reason``) and the notifications to send once it
is written. A failed action is retried with exponential back-off
(``retry_interval`` x 2^n) up to ``max_retries`` (or the lease's own
``retries``); then the event and the lease go to ERROR with a
``status_reason`` that says what failed.
"""

import datetime

from oslo_log import log as logging
from oslo_utils import timeutils

from nova_lease import notifications
from nova_lease.periodic import jobs
from nova_lease.plugins import base as plugin_base
from nova_lease import status

LOG = logging.getLogger(__name__)

_L = status.LeaseStatus
_R = status.ReservationStatus
_E = status.EventStatus
_T = status.EventType

HUNT_TIMED_OUT = plugin_base.HuntTimedOut

#: What a best-effort lease shows while its hunt goes on, and when it
#: gave up (the plugin's text, naming other projects' servers, hosts and
#: Nova's faults, is logged only).
HUNT_SAFE = ('servers are still being moved off the hosts the lease took '
             'from the cloud (the operator has the details)')
TIMED_OUT_SAFE = ('best-effort lease gave up after %d minutes '
                  '([nova_lease_engine] best_effort_timeout): the hosts it '
                  'took from the cloud were not emptied in time; every host '
                  'it held is released')

SUCCESS_NOTICES = {
    _T.START_LEASE: notifications.START,
    _T.END_LEASE: notifications.END,
}


def sources(kind, new):
    """Every status of ``kind`` that may move to ``new``."""
    return sorted(old for old in status.TRANSITIONS[kind]
                  if status.can_transition(kind, old, new))


def max_retries(lease, conf):
    """How many times a failed action of lease is retried (its own
    retries, else ``[nova_lease] max_retries`` of ``conf``).
    """
    retries = lease.get('retries')
    return conf.nova_lease.max_retries if retries is None else retries


def hunting(event, lease):
    """Is this the start of a best-effort lease hunting for hosts?

    Such a start is retried every ``best_effort_retry_interval`` seconds,
    whatever ``max_retries`` says, until the plugin gives up at the
    lease's ``best_effort_timeout`` (TIMEDOUT).
    """
    return (event['event_type'] == _T.START_LEASE and
            lease.get('status') == _L.IN_PROGRESS)


def _timed_out(error):
    """The HuntTimedOut behind error, or None."""
    seen = 0
    while error is not None and seen < 10:
        if isinstance(error, HUNT_TIMED_OUT):
            return error
        error, seen = error.__cause__, seen + 1
    return None


def result(event, event_status, **extra):
    """What engine_complete_events records for event."""
    out = {'event_id': event['id'], 'lease_id': event['lease_id'],
           'status': str(event_status)}
    out.update(extra)
    return out


def success(event, lease, notes=()):
    """The result of a finished action.

    ``notes``: what the plugins said about it (see
    nova_lease.plugins.base: e.g. servers left alone); they become
    the lease's status_reason (None clears an old one) and the
    event's last_error, and go with its notification.
    """
    etype = event['event_type']
    note = '; '.join(notes) or None
    extra = {}
    if note:
        LOG.warning('%(type)s of lease %(lease)s: %(note)s',
                    {'type': etype, 'lease': lease['id'],
                     'note': note})
        extra = {'status_reason': note, 'last_error': note}
    new = None
    if etype == _T.START_LEASE:
        new = _L.ACTIVE
        extra.update({'lease_status': str(new),
                      'lease_expected': [str(_L.STARTING),
                                         str(_L.IN_PROGRESS)],
                      'status_reason': note,
                      'reservation_status': str(_R.ACTIVE),
                      'reservation_expected': [str(_R.PENDING)]})
    elif etype == _T.END_LEASE:
        new = _L.TERMINATED
        extra.update({'lease_status': str(new),
                      'lease_expected': [str(_L.TERMINATING)],
                      'status_reason': note,
                      'reservation_status': str(_R.DELETED),
                      'reservation_expected': sources(
                          status.RESERVATION, _R.DELETED)})
    notices = ()
    if etype in SUCCESS_NOTICES:
        notices = ((SUCCESS_NOTICES[etype],
                    dict(lease, status=str(new), status_reason=note)),)
    LOG.debug('%(type)s of lease %(lease)s done',
              {'type': etype, 'lease': lease['id']})
    return result(event, _E.DONE, **extra), notices


def failure(event, lease, error, conf):
    opts = conf.nova_lease_engine
    etype = event['event_type']
    attempts = event['attempts']
    retries = max_retries(lease, conf)
    message = str(error) or type(error).__name__
    now = timeutils.utcnow()
    if hunting(event, lease):
        return _hunt_failure(event, lease, error, opts, message, now)
    if attempts <= retries and not isinstance(error, jobs.GaveUp):
        delay = opts.retry_interval * 2 ** (attempts - 1)
        at = now + datetime.timedelta(seconds=delay)
        reason = ('%s failed (attempt %d of %d), retrying at %s UTC: %s'
                  % (etype, attempts, retries + 1,
                     at.strftime('%Y-%m-%d %H:%M:%S'), message))
        LOG.warning('Lease %(lease)s: %(reason)s',
                    {'lease': lease['id'], 'reason': reason})
        extra = {'last_error': message, 'next_attempt_at': at,
                 'status_reason': reason}
        if etype == _T.START_LEASE:
            extra.update(lease_status=str(_L.PENDING),
                         lease_expected=[str(_L.STARTING)])
        return result(event, _E.UNDONE, **extra), ()
    reason = ('%s failed %d time(s), giving up: %s. Fix the cause, then '
              'retry by setting event %s back to UNDONE%s.'
              % (etype, attempts, message, event['id'],
                 ' (and the lease back to PENDING)'
                 if etype == _T.START_LEASE else ''))
    LOG.error('Lease %(lease)s is now ERROR: %(reason)s',
              {'lease': lease['id'], 'reason': reason})
    extra = {'last_error': message, 'status_reason': reason,
             'lease_status': str(_L.ERROR),
             'lease_expected': sources(status.LEASE, _L.ERROR),
             'reservation_status': str(_R.ERROR),
             'reservation_expected': sources(status.RESERVATION, _R.ERROR)}
    notices = ((notifications.ERROR,
                dict(lease, status=str(_L.ERROR),
                     status_reason=reason)),)
    return result(event, _E.ERROR, **extra), notices


def _hunt_failure(event, lease, error, opts, message, now):
    """A best-effort lease's hunt: TIMEDOUT when its plugin gave up,
    else tried again (it stays IN_PROGRESS).
    """
    gave_up = _timed_out(error)
    if gave_up is None:
        at = now + datetime.timedelta(
            seconds=opts.best_effort_retry_interval)
        # What the plugin says names other projects' servers, hosts and
        # Nova's faults: the log's; the lease shows what its project may
        # see (HUNT_SAFE).
        LOG.info('Lease %(lease)s: hunting for hosts (attempt %(n)d), next '
                 'attempt at %(at)s UTC: %(message)s',
                 {'lease': lease['id'], 'n': event['attempts'],
                  'at': at.strftime('%Y-%m-%d %H:%M:%S'),
                  'message': message})
        reason = ('hunting for hosts (attempt %d), next attempt at %s UTC: '
                  '%s' % (event['attempts'], at.strftime(
                      '%Y-%m-%d %H:%M:%S'), HUNT_SAFE))
        return result(event, _E.UNDONE, last_error=HUNT_SAFE,
                      next_attempt_at=at, status_reason=reason), (
            (notifications.IN_PROGRESS,
             dict(lease, status=str(_L.IN_PROGRESS),
                  status_reason=reason)),)
    LOG.warning('Lease %(lease)s is now TIMEDOUT: %(reason)s',
                {'lease': lease['id'], 'reason': gave_up})
    reason = TIMED_OUT_SAFE % opts.best_effort_timeout
    extra = {'last_error': reason, 'status_reason': reason,
             'lease_status': str(_L.TIMEDOUT),
             'lease_expected': [str(_L.IN_PROGRESS)],
             'reservation_status': str(_R.DELETED),
             'reservation_expected': sources(status.RESERVATION,
                                             _R.DELETED)}
    return result(event, _E.ERROR, **extra), (
        (notifications.TIMEDOUT, dict(lease, status=str(_L.TIMEDOUT),
                                      status_reason=reason)),)
