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
"""Parsing and validation of lease parameters (pure: no I/O, no clock).

Two inputs share one set of rules, checked in two steps: their shape
(keys and JSON types) against their JSON schema (the lease API's
``schemas.lease_params.LEASE_PARAMS`` and ``schemas.leases.LEASE``,
whose properties share their nodes, and so their messages; checked by
nova_lease.api_ext.lease_api.validation, which parses both inputs), then
their meaning here, on the shape-checked object (:func:`_build`, the same
for both):

* the ``lease_params`` boot hint (:func:`load_lease_params`, then
  :func:`build_lease_params`): a *string*
  holding a JSON object with the keys ``name``, ``start``, ``end``,
  ``duration``, ``before_end``, ``on_end``, ``retries``. Nova hands hints
  over as lists of strings; the caller unwraps the list, this module only
  takes the string.
* the Blazar v1 lease body (:func:`build_lease_body`): ``name``,
  ``start_date``, ``end_date``, ``before_end_date``, ``reservations``,
  ``events``, plus our ``on_end`` and ``retries``. Errors use these names.

Rules:

* A key whose value is JSON ``null`` counts as absent (python-blazarclient
  sends ``"before_end_date": null``). Any other key is refused.
* ``name``: a non-blank string of at most 255 characters. Required in the
  API body (as in Blazar); in ``lease_params`` it defaults to the caller's
  ``default_name`` (e.g. the server name) and is required only when the
  caller gives none.
* ``start``: ``"now"`` (any case; the default when absent) or a date. A date
  more than :data:`START_GRACE` (60 s) before ``now`` is refused; a date at
  or before ``now`` within that grace becomes ``now``. Either way the lease
  is then immediate (``start_now`` is true).
* exactly one of ``end`` (a date after ``start``) and ``duration`` (hint
  only). ``max_duration`` (a timedelta; None or zero = unlimited) bounds
  ``end - start``.
* ``before_end``: a date in ``[start, end)``; in the hint also a whole
  number of minutes before ``end`` (int or digit string), whose time must
  also lie in ``[start, end)``. Without it the warning comes
  ``minutes_before_end_lease`` before the end, at most half of the lease
  before it (:func:`default_before_end`).
* ``on_end``: ``delete`` or ``shelve``. ``retries``: an int in 0..100.

Dates (:func:`parse_datetime`): ``YYYY-MM-DD HH:MM[:SS]`` in UTC, where
month, day and hour may have one digit (``2013-12-1 16:07``), or ISO 8601
``YYYY-MM-DDTHH:MM[:SS[.fff]]`` with an optional ``Z`` or offset
(``+02:00``, ``+0200``, ``+02``); no offset means UTC. ``T`` and ``Z``
may be lower case and a blank may come before the offset. Results are
naive UTC datetimes with a year in 1970..9999; digits past microseconds
are dropped. These forms are checked first (``_DATE_RE``, stricter than
ISO 8601: no date alone, no ``HHMM``), then read by the ``iso8601``
library.

Durations (:func:`parse_duration`): an int number of seconds (not a bool),
or a string: digits alone (seconds) or digits followed by ``s``, ``m``,
``h`` or ``d`` (any case; blanks around are ignored), e.g. ``"90m"``,
``"2h"``, ``"3d"``. No fractions, no compounds like ``"1h30m"``.

Free text (``name``, and the strings other modules check with
:func:`check_text`) may not contain control characters, NUL included,
unpaired surrogates or line/paragraph separators (rule ``format``).

Every error is a :class:`LeaseParamError` (HTTP 400) whose ``field`` is the
field as the user wrote it and whose ``rule`` is one of: ``type``,
``format``, ``required``, ``unknown_key``, ``duplicate_key``,
``exclusive``, ``past``, ``order``, ``too_long``, ``range``, ``choice``,
``unsupported``. The message always names the field.
"""

import dataclasses
import datetime
import json
import re

import iso8601

from nova_lease import exception
from nova_lease import wire

START_GRACE = datetime.timedelta(seconds=60)
#: A default before_end_lease warning comes at most this fraction of the
#: lease's length before its end (see :func:`default_before_end`).
BEFORE_END_MAX_FRACTION = 0.5
NAME_MAX_LENGTH = 255
MAX_RETRIES = 100
ON_END_ACTIONS = ('delete', 'shelve')
#: Climate's lease types (nova_lease.lease_types); best_effort only for
#: host reservations of the lease API.
LEASE_TYPES = ('immediate', 'retries', 'scheduled', 'best_effort')
MAX_RAW_LENGTH = 65535

#: Internal scheduler hints: the nova-api filter adds them, LeaseFilter
#: reads them (it never parses ``lease_params``); a user who sends one in
#: a boot gets a 400. ``nova_lease_id=<lease id>`` marks the first boot
#: of a leased server (also a future lease's, created shelved-offloaded,
#: whose unshelve at the start finds it in its RequestSpec);
#: ``nova_lease_reservation=<reservation id>`` is in the RequestSpecs of
#: servers that earlier releases created at their lease's start.
LEASE_ID_HINT = wire.HINT_INTERNAL_LEASE_ID
RESERVATION_HINT = wire.HINT_INTERNAL_RESERVATION
INTERNAL_HINTS = (LEASE_ID_HINT, RESERVATION_HINT)

DATE_FORMATS_HELP = ("'YYYY-MM-DD HH:MM' (UTC) or ISO 8601 such as "
                     "'2026-12-01T16:07:00+02:00'")
API_DATE_FORMAT = '%Y-%m-%dT%H:%M:%S.%f'

_MIN_YEAR = 1970
_EPOCH = datetime.datetime(_MIN_YEAR, 1, 1)
# No lease can last longer than the whole range of accepted dates.
_MAX_SPAN = datetime.datetime.max - _EPOCH

_DATE_RE = re.compile(
    r'(?P<y>\d{4})-(?P<mo>\d{1,2})-(?P<d>\d{1,2})[T ]'
    r'(?P<h>\d{1,2}):(?P<mi>\d{2})'
    r'(?::(?P<s>\d{2})(?:[.,](?P<f>\d+))?)?'
    r'\s*(?P<tz>Z|(?P<sign>[+-])(?P<oh>\d{2})(?::?(?P<om>\d{2}))?)?',
    re.ASCII | re.IGNORECASE)
_INT_RE = re.compile(r'[+-]?\d+', re.ASCII)
_DURATION_RE = re.compile(r'(?P<n>[+-]?\d+)\s*(?P<unit>[smhd]?)',
                          re.ASCII | re.IGNORECASE)
_UNIT_SECONDS = {'': 1, 's': 1, 'm': 60, 'h': 3600, 'd': 86400}

# Control characters (Unicode Cc: C0, DEL, C1), unpaired surrogates
# (no UTF-8 form: MySQL and PostgreSQL refuse them) and the line and
# paragraph separators: never part of a name or another free-text field.
# (PostgreSQL cannot store NUL at all.)
_BAD_TEXT_RE = re.compile('[\x00-\x1f\x7f-\x9f\ud800-\udfff'
                          '\u2028\u2029]')

_HINT_NAMES = {'name': 'name', 'start': 'start', 'end': 'end',
               'duration': 'duration', 'before_end': 'before_end',
               'on_end': 'on_end', 'retries': 'retries', 'type': 'type'}
_BODY_NAMES = {'name': 'name', 'start': 'start_date', 'end': 'end_date',
               'before_end': 'before_end_date', 'on_end': 'on_end',
               'retries': 'retries', 'type': 'lease_type'}
#: The keys of a lease-API lease body.
BODY_KEYS = frozenset(_BODY_NAMES.values()) | {'reservations', 'events'}
#: The keys of a lease body with a flexible window (``start_date``
#: "earliest"), read by the lease API before the body is parsed as a
#: lease from its earliest start.
FLEXIBLE_KEYS = frozenset({'duration', 'earliest_start', 'latest_start'})


class LeaseParamError(exception.Invalid):
    """A lease parameter is invalid; ``field`` and ``rule`` tell which."""

    def __init__(self, field, rule, reason, where=None):
        self.field = field
        self.rule = rule
        self.reason = reason
        self.where = where
        message = '%s: %s' % (where, reason) if where else reason
        super().__init__(message, field=field, rule=rule, reason=reason)

    def within(self, where):
        """The same error, its message prefixed with ``where``."""
        if self.where:
            return self
        return LeaseParamError(self.field, self.rule, self.reason, where)


def bad_character(text):
    """The first forbidden character of a free-text string, or None.

    Forbidden: control characters (NUL, tab, newline, DEL, C1...),
    unpaired surrogates and the Unicode line/paragraph separators.
    """
    match = _BAD_TEXT_RE.search(text)
    return None if match is None else (match.start(), match.group())


def check_text(value, field):
    """Refuse (400 naming ``field``) a string with a forbidden character.

    Every free-text field goes through it before it is stored: see
    :func:`bad_character`. Returns ``value``.
    """
    found = bad_character(value)
    if found is not None:
        index, char = found
        raise _error(field, 'format', "'%s' must not contain control "
                     "characters (U+%04X at position %d)", field, ord(char),
                     index)
    return value


def _error(field, rule, fmt, *args):
    return LeaseParamError(field, rule, fmt % args if args else fmt)


#: The LeaseParamError of ``fmt % args``, for the other validators of
#: lease requests (host and instance reservations, updates).
error = _error


def quoted(value, limit=60):
    """A value as an error message quotes it (its repr, cut to limit)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + '...'


def json_type(value):
    """The JSON type of a value, as an error message names it."""
    if value is None:
        return 'null'
    if isinstance(value, bool):
        return 'a boolean'
    if isinstance(value, (int, float)):
        return 'a number'
    if isinstance(value, str):
        return 'a string'
    if isinstance(value, (list, tuple)):
        return 'an array'
    if isinstance(value, dict):
        return 'an object'
    return type(value).__name__


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def format_datetime(dt):
    """``dt`` as Blazar's API writes dates (``2017-12-26T12:00:00.000000``).

    Aware datetimes are converted to UTC; None stays None.
    """
    if dt is None:
        return None
    if dt.tzinfo is not None:
        dt = dt.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return dt.strftime(API_DATE_FORMAT)


def format_short(dt):
    """``YYYY-MM-DD HH:MM`` for messages (``:SS`` added when not zero)."""
    if dt.second or dt.microsecond:
        return dt.strftime('%Y-%m-%d %H:%M:%S')
    return dt.strftime('%Y-%m-%d %H:%M')


def format_duration(delta):
    """A timedelta for messages: '3d', '2h', '1h 30m', '365d 1m', '0s'."""
    seconds = int(delta.total_seconds())
    parts = []
    for unit in ('d', 'h', 'm', 's'):
        count, seconds = divmod(seconds, _UNIT_SECONDS[unit])
        if count:
            parts.append('%d%s' % (count, unit))
    return ' '.join(parts) or '0s'


def parse_datetime(value, field):
    """Parse a date string (see the module docstring) to naive UTC."""
    return _parse_datetime(value, field, DATE_FORMATS_HELP)


def _parse_datetime(value, field, accepted):
    if not isinstance(value, str):
        raise _error(field, 'type', "'%s' must be a date string (%s), got %s",
                     field, accepted, json_type(value))
    match = _DATE_RE.fullmatch(value.strip())
    if not match:
        raise _error(field, 'format', "'%s' must be a date as %s, got %s",
                     field, accepted, quoted(value))
    g = match.groupdict()
    year = int(g['y'])
    if not _MIN_YEAR <= year <= 9999:
        raise _error(field, 'range', "'%s' (%s): the year must be between "
                     "%d and 9999", field, value, _MIN_YEAR)
    bad_offset = bool(g['sign']) and (int(g['oh']) > 23 or
                                      int(g['om'] or 0) > 59)
    try:
        dt = iso8601.parse_date(_iso8601(g, offset=not bad_offset),
                                default_timezone=None)
    except iso8601.ParseError as e:
        raise _error(field, 'format', "'%s' (%s) is not a valid date (%s)",
                     field, value.strip(), e) from None
    if bad_offset:
        raise _error(field, 'format', "'%s' (%s) has an invalid UTC "
                     "offset", field, value)
    if dt.tzinfo is not None:
        try:
            dt = dt.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        except OverflowError:
            dt = None
        if dt is None or dt.year < _MIN_YEAR:
            raise _error(field, 'range', "'%s' (%s) in UTC falls outside the "
                         "years %d to 9999", field, value, _MIN_YEAR)
    return dt


def _iso8601(g, offset=True):
    """The accepted date matched by _DATE_RE, as iso8601 reads it.

    Two-digit month, day and hour, ``T``, at most six digits of fraction
    (digits past microseconds are dropped, not rounded), an upper-case
    ``Z`` and no blank before the offset; without ``offset`` the offset
    is left out (naive: a date iso8601 cannot check then).
    """
    text = '%s-%02d-%02dT%02d:%s' % (g['y'], int(g['mo']), int(g['d']),
                                     int(g['h']), g['mi'])
    if g['s'] is not None:
        text += ':' + g['s']
        if g['f'] is not None:
            text += '.' + g['f'][:6]
    if g['tz'] and offset:
        text += 'Z' if g['tz'].upper() == 'Z' else g['tz']
    return text


def parse_duration(value, field, allow_zero=False):
    """Parse a duration (see the module docstring) to a timedelta > 0.

    With ``allow_zero`` a zero duration is accepted (for options where 0
    means "no limit").
    """
    if _is_int(value):
        seconds = value
        shown = '%d' % value if abs(value) < 10 ** 20 else 'a huge number'
    elif isinstance(value, str):
        match = _DURATION_RE.fullmatch(value.strip())
        if not match:
            raise _error(field, 'format', "'%s' must be a number of seconds "
                         "or a number followed by s, m, h or d (e.g. '90m', "
                         "'2h', '3d'), got %s", field, quoted(value))
        digits = match.group('n').lstrip('+-').lstrip('0')
        shown = value.strip() if len(value) <= 30 else quoted(value)
        if len(digits) > 20 and not match.group('n').startswith('-'):
            raise _error(field, 'too_long', "'%s' (%s) is too long", field,
                         shown)
        seconds = -1 if len(digits) > 20 else (
            int(match.group('n')) * _UNIT_SECONDS[match.group('unit').lower()])
    else:
        raise _error(field, 'type', "'%s' must be a string such as '2h' or "
                     "an integer number of seconds, got %s", field,
                     json_type(value))
    if seconds < 0 or (seconds == 0 and not allow_zero):
        raise _error(field, 'range', "'%s' (%s) must be %s", field, shown,
                     'zero or more' if allow_zero else 'more than zero')
    if seconds > _MAX_SPAN.total_seconds():
        raise _error(field, 'too_long', "'%s' (%s) is too long", field, shown)
    return datetime.timedelta(seconds=seconds)


def later(dt, delta, field, what='the window'):
    """``dt + delta``, or a LeaseParamError naming ``field`` (the date's)
    when that falls after the last date there is (the end of the year
    9999): a date the parser takes may leave no room for a default span
    after it.
    """
    try:
        return dt + delta
    except OverflowError:
        raise _error(field, 'range', "'%s' (%s): %s of %s from it ends "
                     "after the year 9999; take an earlier '%s'", field,
                     format_short(dt), what, format_duration(delta),
                     field) from None


@dataclasses.dataclass(frozen=True)
class LeaseParams:
    """A valid lease request. ``before_end`` is only an explicit one."""

    name: str
    start: datetime.datetime
    end: datetime.datetime
    start_now: bool = False
    before_end: datetime.datetime | None = None
    on_end: str | None = None
    retries: int | None = None
    lease_type: str | None = None

    @property
    def duration(self):
        return self.end - self.start

    def effective_before_end(self, minutes_before_end_lease):
        """When the before_end_lease event fires, or None for no event.

        An explicit ``before_end`` wins; otherwise
        :func:`default_before_end`.
        """
        if self.before_end is not None:
            return self.before_end
        return default_before_end(self.start, self.end,
                                  minutes_before_end_lease)


def default_before_end(start, end, minutes_before_end_lease):
    """The default time of a lease's before_end_lease warning, or None.

    ``minutes_before_end_lease`` (``[nova_lease_api]`` option) before ``end``,
    but never more than :data:`BEFORE_END_MAX_FRACTION` (half) of the
    lease before it: a lease of an hour or less with the default 60
    minutes is warned half-way, not at its start (a 1-hour lease 30
    minutes before its end, a 10-minute one 5 minutes before). 0 minutes
    means no event (None).
    """
    if not minutes_before_end_lease:
        return None
    length = end - start
    try:
        ahead = datetime.timedelta(minutes=minutes_before_end_lease)
    except OverflowError:
        ahead = length
    ahead = min(ahead, length * BEFORE_END_MAX_FRACTION)
    # Whole seconds, as the dates of the lease API.
    ahead = datetime.timedelta(seconds=int(ahead.total_seconds()))
    return end - ahead


def parse_name(value, field):
    """A lease name (a string: the schemas check the type): non-blank
    printable text, at most NAME_MAX_LENGTH characters; LeaseParamError
    naming ``field`` if not.
    """
    if not value.strip() or len(value) > NAME_MAX_LENGTH:
        raise _error(field, 'range', "'%s' must be a non-blank string of at "
                     "most %d characters", field, NAME_MAX_LENGTH)
    return check_text(value, field)


def check_not_past(at, now, field):
    """Refuse (rule ``past``) a date more than START_GRACE before now."""
    if at < now - START_GRACE:
        raise _error(field, 'past', "'%s' (%s) is in the past (now is %s)",
                     field, format_short(at), format_short(now))


def check_order(end, start, f_end, f_start):
    """Refuse (rule ``order``) an ``end`` not after ``start``."""
    if end <= start:
        raise _error(f_end, 'order', "'%s' (%s) must be after '%s' (%s)",
                     f_end, format_short(end), f_start, format_short(start))


def check_length(length, max_duration, field, shown, by_end=True):
    """Refuse (rule ``too_long``) a lease of ``length`` longer than
    ``max_duration`` (None or zero: no limit); ``field`` (shown as
    ``shown``) is its end (``by_end``) or its duration.
    """
    if not max_duration or length <= max_duration:
        return
    limit = format_duration(max_duration)
    if by_end:
        raise _error(field, 'too_long', "'%s' (%s) makes the lease %s "
                     "long; the maximum lease duration is %s", field,
                     shown, format_duration(length), limit)
    raise _error(field, 'too_long', "'%s' (%s) is longer than the maximum "
                 "lease duration (%s)", field, shown, limit)


def check_within(at, shown, start, end, field, f_start, f_end):
    """Refuse (rule ``range``) a before_end time ``at`` (shown as
    ``shown``) outside ``[start, end)``.
    """
    if not start <= at < end:
        raise _error(field, 'range', "'%s' (%s) must be at or after '%s' (%s)"
                     " and before '%s' (%s)", field, shown, f_start,
                     format_short(start), f_end, format_short(end))


def _parse_start(value, now, field):
    if value is None or (isinstance(value, str) and
                         value.strip().lower() == 'now'):
        return now, True
    start = parse_datetime(value, field)
    check_not_past(start, now, field)
    if start <= now:
        return now, True
    return start, False


def _parse_end(data, names, start, max_duration):
    f_end, f_dur = names['end'], names.get('duration')
    end_raw = data.get(f_end)
    dur_raw = data.get(f_dur) if f_dur else None
    if end_raw is not None and dur_raw is not None:
        raise _error(f_dur, 'exclusive', "give either '%s' or '%s', not "
                     "both", f_end, f_dur)
    if end_raw is None and dur_raw is None:
        if f_dur:
            raise _error(f_end, 'required', "'%s' or '%s' is required",
                         f_end, f_dur)
        raise _error(f_end, 'required', "'%s' is required", f_end)
    if end_raw is not None:
        field = f_end
        end = parse_datetime(end_raw, f_end)
        check_order(end, start, f_end, names['start'])
        length, shown = end - start, format_short(end)
    else:
        field = f_dur
        length = parse_duration(dur_raw, f_dur)
        shown = format_duration(length)
    check_length(length, max_duration, field, shown, by_end=field == f_end)
    try:
        return start + length
    except OverflowError:
        raise _error(field, 'too_long', "'%s' (%s) ends after the year 9999",
                     field, shown) from None


def _parse_before_end(value, names, start, end, allow_minutes):
    field = names['before_end']
    if value is None:
        return None
    if allow_minutes and (_is_int(value) or (
            isinstance(value, str) and _INT_RE.fullmatch(value.strip()))):
        text = str(value).strip()
        if len(text.lstrip('+-').lstrip('0')) > 20:
            # Only the sign matters (and int() refuses very long strings).
            minutes = -1 if text.startswith('-') else 10 ** 20
            text = text[:17] + '...'
        else:
            minutes = int(text)
        shown = "%s minutes before '%s'" % (text, names['end'])
        if minutes <= 0:
            raise _error(field, 'range', "'%s' (%s) must be more than zero "
                         "minutes", field, shown)
        if minutes > _MAX_SPAN.total_seconds() // 60:
            at = datetime.datetime.min
        else:
            at = end - datetime.timedelta(minutes=minutes)
    else:
        accepted = DATE_FORMATS_HELP
        if allow_minutes:
            accepted += ", or a whole number of minutes before '%s'" % (
                names['end'])
        at = _parse_datetime(value, field, accepted)
        shown = format_short(at)
    check_within(at, shown, start, end, field, names['start'], names['end'])
    return at


def _parse_on_end(value, field):
    if value is None:
        return None
    if value not in ON_END_ACTIONS:
        raise _error(field, 'choice', "'%s' must be one of %s, got %s",
                     field, ', '.join(ON_END_ACTIONS), quoted(value))
    return value


def _parse_retries(value, field):
    if value is None:
        return None
    if not 0 <= value <= MAX_RETRIES:
        raise _error(field, 'range', "'%s' (%d) must be between 0 and %d",
                     field, value, MAX_RETRIES)
    return value


def _build(data, names, now, max_duration, default_name=None):
    """The semantic checks of a lease, on ``data`` whose keys and JSON
    types its schema accepted; ``names`` are the
    fields as the user named them (the hint's or the lease body's).
    """
    name = data.get(names['name'])
    if name is None:
        if default_name is None:
            raise _error(names['name'], 'required', "'%s' is required",
                         names['name'])
        name = default_name
    name = parse_name(name, names['name'])
    start, start_now = _parse_start(data.get(names['start']), now,
                                    names['start'])
    end = _parse_end(data, names, start, max_duration)
    before_end = _parse_before_end(data.get(names['before_end']), names,
                                   start, end, 'duration' in names)
    retries = _parse_retries(data.get(names['retries']), names['retries'])
    return LeaseParams(
        name=name, start=start, end=end, start_now=start_now,
        before_end=before_end,
        on_end=_parse_on_end(data.get(names['on_end']), names['on_end']),
        retries=retries,
        lease_type=_parse_lease_type(data.get(names['type']), names,
                                     start_now, retries))


def _parse_lease_type(value, names, start_now, retries):
    field = names['type']
    if value is None:
        return None
    if value == 'best_effort' and names is _HINT_NAMES:
        raise _error(field, 'unsupported', "'%s': best_effort applies to "
                     "host reservations (the lease API's physical:host), "
                     "not to a server's lease; use immediate, retries or "
                     "scheduled", field)
    if value not in LEASE_TYPES:
        raise _error(field, 'choice', "'%s' must be one of %s, got %s",
                     field, ', '.join(LEASE_TYPES), quoted(value))
    if value in ('immediate', 'best_effort'):
        kind = 'an immediate' if value == 'immediate' else 'a best_effort'
        if not start_now:
            raise _error(field, 'unsupported', "'%s': %s lease "
                         "starts now ('%s' \"now\")", field, kind,
                         names['start'])
        if retries:
            raise _error(names['retries'], 'unsupported', "'%s': %s "
                         "lease is never retried (%s)", names['retries'],
                         kind, 'it is provisioned now or not at all'
                         if value == 'immediate' else 'it hunts until '
                         '[nova_lease_engine] best_effort_timeout')
    return value


def _unique_keys(pairs):
    data = {}
    for key, value in pairs:
        if key in data:
            raise _error(key, 'duplicate_key', "'%s' is given more than once",
                         key)
        data[key] = value
    return data


def load_lease_params(raw):
    """The JSON object of the ``lease_params`` hint string ``raw``.

    Its shape (keys, JSON types) is the schema's to check
    (``schemas.lease_params.LEASE_PARAMS``, see
    nova_lease.api_ext.lease_api.validation.parse_lease_params); its
    meaning :func:`build_lease_params`'.
    :raises LeaseParamError: naming ``lease_params``.
    """
    if not isinstance(raw, str):
        raise _error('lease_params', 'type', "'lease_params' must be a "
                     "string holding a JSON object, got %s", json_type(raw))
    if len(raw) > MAX_RAW_LENGTH:
        raise _error('lease_params', 'range', "'lease_params' is longer "
                     "than %d characters", MAX_RAW_LENGTH)
    try:
        data = json.loads(raw, object_pairs_hook=_unique_keys)
    except (ValueError, RecursionError) as e:
        raise _error('lease_params', 'format', "'lease_params' is not "
                     "valid JSON (%s)", e) from None
    if not isinstance(data, dict):
        raise _error('lease_params', 'type', "'lease_params' must be a "
                     "JSON object such as {\"end\": \"2026-12-01 16:07\"}"
                     ", got %s", json_type(data))
    return data


def build_lease_params(data, now, max_duration=None, default_name=None):
    """The :class:`LeaseParams` of a shape-checked ``lease_params`` object.

    :param now: the current time, naive UTC.
    :param max_duration: longest lease allowed (timedelta), None/0 = any.
    :param default_name: the name used when the hint gives none; when None
        the name is required.
    :raises LeaseParamError: naming the hint's keys.
    """
    return _build(data, _HINT_NAMES, now, max_duration, default_name)


def _parse_reservations(value):
    # As in Blazar, a lease may hold no reservation (absent, null or []):
    # its events still run, and it goes ACTIVE, then TERMINATED.
    if value is None:
        return []
    for i, item in enumerate(value):
        field = 'reservations[%d]' % i
        rtype = item.get('resource_type')
        if rtype is None or not rtype.strip():
            field += '.resource_type'
            raise _error(field, 'required' if rtype is None else 'type',
                         "'%s' must be a non-blank string such as "
                         "'virtual:instance', got %s", field,
                         json_type(rtype))
    return [dict(item) for item in value]


def build_lease_body(body, now, max_duration=None):
    """The meaning of a shape-checked Blazar v1 lease-create body
    (``schemas.leases.LEASE``, see
    nova_lease.api_ext.lease_api.validation.parse_lease_body).

    :returns: ``(LeaseParams, reservations)``, the reservations being
        shallow copies of the request's objects (each has a string
        ``resource_type``; the resource plugins check the rest).
    :raises LeaseParamError: fields named as in Blazar (``start_date``...).
    """
    if body.get('events'):
        raise _error('events', 'unsupported', "'events' must be empty: "
                     "lease events are created from the lease dates")
    params = _build(body, _BODY_NAMES, now, max_duration)
    return params, _parse_reservations(body.get('reservations'))
