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
"""Handler of ``/offers``: when a reservation would fit
(doc/source/user/api.rst).

A thin adapter: the request is a reservation's (parsed by its type, as
in a lease body), the search is nova_lease.booking.offers' over the
scheduler's snapshot of the calendar (current through the change
journal), and the answer is :func:`..flexible.offer_view`'s. The usage
limits of the caller's project bound the starts
(nova_lease.enforcement.offer_bounds).
"""

from nova_lease.api_ext.lease_api import common
from nova_lease.api_ext.lease_api import flexible
from nova_lease.api_ext.lease_api.handlers import capacity
from nova_lease.api_ext.lease_api.schemas import offers as offer_schemas
from nova_lease.booking import offers
from nova_lease.booking import pipeline
from nova_lease import enforcement
from nova_lease import params as lease_params
from nova_lease.policies import offers as offer_policies
from nova_lease import policy
from nova_lease import resource_types as types
from nova_lease.scheduler import view

_error = lease_params.error
# How the types' parsers name the request (stripped: the query's
# parameters are named as they are).
_FIELD = '@offer@'


def _item(get, caller):
    """The pipeline Item of the query's reservation request."""
    rtype = get.get('resource_type')
    if rtype in (None, ''):
        raise _error('resource_type', 'required', "'resource_type' is "
                     "required: one of %s", ', '.join(types.api_names()))
    kind = types.for_api(rtype)
    if kind is None:
        raise _error('resource_type', 'choice', "'resource_type' must be "
                     "one of %s, got %s", ', '.join(types.api_names()),
                     lease_params.quoted(rtype))
    raw = {k: get[k] for k in offer_schemas.RESERVATION_KEYS if k in get}
    try:
        return pipeline.Item('the request', kind,
                             kind.parse(raw, _FIELD, caller))
    except lease_params.LeaseParamError as e:
        field = e.field.replace(_FIELD + '.', '').replace(_FIELD, 'query')
        reason = e.reason.replace(_FIELD + '.', '').replace(_FIELD,
                                                            'query')
        raise lease_params.LeaseParamError(field, e.rule, reason) from None


def parse_query(get, now, max_duration):
    """(duration, earliest, latest, limit) of the query; LeaseParamErrors
    naming the field.
    """
    if get.get('duration') in (None, ''):
        raise _error('duration', 'required', "'duration' is required "
                     "(such as '4h', '90m' or '2d')")
    duration = lease_params.parse_duration(get['duration'], 'duration')
    if max_duration and duration > max_duration:
        raise _error('duration', 'range', "'duration' (%s) is longer than "
                     "the longest lease (%s)",
                     lease_params.format_duration(duration),
                     lease_params.format_duration(max_duration))
    earliest = now
    if get.get('earliest') not in (None, '', 'now'):
        earliest = max(lease_params.parse_datetime(get['earliest'],
                                                   'earliest'), now)
    if get.get('latest') in (None, ''):
        latest = lease_params.later(earliest, offers.DEFAULT_SPAN,
                                    'earliest')
    else:
        latest = lease_params.parse_datetime(get['latest'], 'latest')
        if latest < earliest:
            raise _error('latest', 'order', "'latest' (%s) is before the "
                         "earliest start (%s)",
                         lease_params.format_short(latest),
                         lease_params.format_short(earliest))
    limit = offers.DEFAULT_LIMIT
    if get.get('limit') not in (None, ''):
        try:
            limit = int(get['limit'])
        except ValueError:
            limit = 0
        if not 1 <= limit <= offers.MAX_LIMIT:
            raise _error('limit', 'range', "'limit' must be an integer "
                         "from 1 to %d, got %s", offers.MAX_LIMIT,
                         lease_params.quoted(get['limit']))
    return duration, earliest, latest, limit


def list_offers(req, ctx):
    """GET /offers?resource_type=...&duration=[&earliest=&latest=
    &limit=]: see doc/source/user/api.rst.
    """
    policy.authorize(ctx, offer_policies.GET,
                     {'project_id': ctx.project_id})
    now = common.now()
    get = dict(req.GET)
    duration, earliest, latest, limit = parse_query(
        get, now, common.max_duration())
    item = _item(get, common.caller(ctx))
    conf = common.CONF
    db = common.db()
    with db.reader() as session:
        bound, refused = enforcement.offer_bounds(conf, session,
                                                  ctx.project_id, now)
    if refused:
        return 200, {'offers': [], 'reason': refused}
    if bound is not None and bound < latest:
        if bound < earliest:
            return 200, {'offers': [], 'reason': (
                'the usage limits of this project let no lease start '
                'after %s ([nova_lease_enforcement] max_start_ahead)'
                % lease_params.format_short(bound))}
        latest = bound
    snap = view.get_snapshot(now, conf, wait=capacity.MEMBER_WAIT)
    if snap is None:
        raise capacity.CalendarNotReady()
    with db.reader() as session:
        found, candidates = offers.search(
            session, conf, item, now, duration, earliest, latest, limit,
            cal=snap.calendar, strict=True)
    show = flexible.shows_hosts(ctx)
    body = {'offers': [flexible.offer_view(o, show) for o in found]}
    if not found:
        body['reason'] = offers.none_reason(item, candidates, earliest,
                                            latest, duration)
    return 200, body
