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
"""The lease hints of ``POST /servers``: what a boot asks for.

The hints (in ``os:scheduler_hints`` or ``OS-SCH-HNT:scheduler_hints``,
whichever Nova reads; values as strings or lists of strings, as Nova and
the ``nova`` CLI send them):

* ``reserved``: ``True`` or ``False`` (any case). ``reserved=True`` needs
  ``lease_params``; ``reserved=False`` with ``lease_params`` is refused;
  ``lease_params`` alone means ``reserved=True``.
* ``lease_params``: a JSON *string* (see :mod:`nova_lease.params`); the
  lease name defaults to the server name.

A boot with neither gets the ``[nova_lease] default_lease`` when it is
enabled (``default_lease_duration`` from now), unless its project is in
``default_lease_exempt_projects``. ``reserved=False`` does not opt out of
the default lease: it is the operator's rule.

Any boot with ``--hint reservation=<id>`` (a host reservation's id),
leased or not, gets the server metadata ``lease_reservation_id=<id>``
(:func:`add_reservation_metadata`): the end of that host lease acts only
on servers that carry it.

:func:`lease_request` turns the hints into a :class:`LeaseRequest` (or
refuses them with the field named); :func:`server_count` reads how many
servers the request may create and :func:`set_hint` adds a scheduler hint
where Nova reads it. They read the request body and the options only;
the paste filter's handling of the boot is in
:mod:`nova_lease.api_ext.servers`.
"""

from nova_lease.api_ext.lease_api import validation
from nova_lease import exception
from nova_lease import params as lease_params
from nova_lease.plugins.host import plugin as host_plugin
from nova_lease import wire

HINT_KEYS = ('os:scheduler_hints', 'OS-SCH-HNT:scheduler_hints')
RESERVED = wire.HINT_RESERVED
LEASE_PARAMS = wire.HINT_LEASE_PARAMS
_TRUE = 'true'
_FALSE = 'false'


class HintError(exception.Invalid):
    """A lease hint is invalid (400); the message names the field."""

    msg_fmt = '%(reason)s'

    def __init__(self, field, reason):
        self.field = field
        super().__init__(reason, field=field, reason=reason)


def _single(hints, key):
    """The hint's value: a string (or bool), a one-element list unwrapped.

    Returns None when the hint is absent.
    """
    if key not in hints:
        return None
    value = hints[key]
    if isinstance(value, list):
        if not value:
            raise HintError(key, "'%s' must not be an empty list" % key)
        if any(not isinstance(v, str) for v in value):
            raise HintError(key, "'%s' must be a string or a list of "
                                 "strings" % key)
        if len(set(value)) > 1:
            raise HintError(key, "'%s' is given more than once with "
                                 "different values" % key)
        value = value[0]
    return value


def parse_reserved(hints):
    """True, False or None (absent) from the ``reserved`` hint."""
    value = _single(hints, RESERVED)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text == _TRUE:
            return True
        if text == _FALSE:
            return False
        shown = value if len(value) <= 40 else value[:37] + '...'
        raise HintError(RESERVED, "'reserved' must be True or False, got "
                                  "%r" % shown)
    raise HintError(RESERVED, "'reserved' must be the string True or False")


class BadOption(exception.NovaLeaseException):
    """A [nova_lease_api] option is invalid: the operator's error
    (500).
    """

    msg_fmt = 'nova_lease is misconfigured: [nova_lease_api] %(reason)s'


def _option_duration(opts, name, allow_zero=False):
    try:
        return lease_params.parse_duration(getattr(opts, name), name,
                                           allow_zero=allow_zero)
    except lease_params.LeaseParamError as e:
        raise BadOption(reason=str(e)) from None


class LeaseRequest(object):
    """What a boot asks for, once the hints are checked."""

    __slots__ = ('params', 'default')

    def __init__(self, params, default=False):
        self.params = params
        self.default = default


def lease_request(conf, hints, project_id, server_name, now):
    """The LeaseRequest of a boot, or None for an unleased boot.

    :raises HintError: (400) a hint is malformed.
    :raises nova_lease.params.LeaseParamError: (400) lease_params invalid.
    """
    opts = conf.nova_lease
    api_opts = conf.nova_lease_api
    reserved = parse_reserved(hints)
    raw = _single(hints, LEASE_PARAMS)
    max_duration = _option_duration(api_opts, 'max_lease_duration',
                                    allow_zero=True)
    default_name = server_name if isinstance(server_name, str) and (
        server_name.strip()) else None
    if default_name is not None and (reserved or raw is not None or (
            opts.default_lease)) and lease_params.bad_character(
                default_name):
        # (Nova refuses such a server name too, after the lease would
        # have been recorded.)
        raise HintError('name', "'name' (the server name, the lease's "
                                "name by default) must not contain control "
                                "characters")
    if raw is not None:
        if reserved is False:
            raise HintError(RESERVED, "'reserved' is False but "
                                      "'lease_params' is given")
        params = validation.parse_lease_params(
            raw, now, max_duration=max_duration, default_name=default_name)
        return LeaseRequest(params)
    if reserved:
        raise HintError(LEASE_PARAMS, "'lease_params' is required with "
                                      "reserved=True")
    if not opts.default_lease or project_id in (
            opts.default_lease_exempt_projects or ()):
        return None
    duration = _option_duration(api_opts, 'default_lease_duration')
    params = lease_params.LeaseParams(
        name=default_name or 'default lease', start=now,
        end=now + duration, start_now=True)
    return LeaseRequest(params, default=True)


def set_hint(body, key, value):
    """Set scheduler hint ``key`` in the request body, where Nova reads it.
    """
    for hint_key in HINT_KEYS:
        if isinstance(body.get(hint_key), dict):
            body[hint_key][key] = value
            return
    body[HINT_KEYS[0]] = {key: value}


def server_count(server):
    """max_count of the request (min_count if absent), or None if invalid.
    """
    try:
        min_count = int(server.get('min_count', 1))
        max_count = int(server.get('max_count', min_count))
    except (TypeError, ValueError):
        return None
    if min_count < 1 or max_count < min_count:
        return None
    return max_count


#: The boot hint that asks for the hosts of a host reservation.
RESERVATION_HINT = wire.HINT_RESERVATION


def add_reservation_metadata(server, hints):
    """Record ``--hint reservation=<id>`` in the server's metadata.

    A boot with the hint gets the metadata ``lease_reservation_id=<id>``
    (:data:`nova_lease.plugins.host.plugin.META_SERVER_RESERVATION`; a
    value the user gave for that key is replaced): at the end of the host
    lease the engine acts only on the servers of the lease's project that
    carry it (see :mod:`nova_lease.plugins.host.plugin`). Whether the hint
    leads anywhere is LeaseFilter's business; a malformed hint (not one
    string) or malformed metadata is left for Nova and the scheduler to
    refuse.

    Returns True if ``server`` (the request's ``server`` object) changed.
    """
    value = hints.get(RESERVATION_HINT)
    if isinstance(value, list) and len(set(map(str, value))) == 1:
        value = value[0]
    if not isinstance(value, str) or not 0 < len(value) <= 255 or (
            lease_params.bad_character(value)):
        return False
    metadata = server.get('metadata')
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        return False
    key = host_plugin.META_SERVER_RESERVATION
    if metadata.get(key) == value:
        return False
    server['metadata'] = dict(metadata, **{key: value})
    return True
