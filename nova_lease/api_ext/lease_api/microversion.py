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
"""The lease API's microversions, as Blazar and placement do them.

A client asks for a version with the header ``OpenStack-API-Version:
reservation X.Y`` (Blazar's service type; other services' entries in the
same header are ignored), parsed by ``microversion-parse``:

* no header (or no ``reservation`` entry): the minimum, 1.0, which is
  Blazar's v1 exactly (placement's rule; Blazar's only version);
* ``latest``: the maximum;
* a version outside ``[MIN_VERSION, MAX_VERSION]``: 406, the message
  giving the range; a malformed one: 400.

Every answer says which version it was served at (``OpenStack-API-Version:
reservation X.Y``, with ``Vary: OpenStack-API-Version``). A route of a
later version than asked is a 404, as if it did not exist; a field of a
later version is left out of the answer, and a key of a later version in
a body is a 400 that names the version it needs.

:data:`HISTORY` is the contract, one line per version; doc/source/user/
api.rst ("API versions") says the same for users.
"""

import microversion_parse

from nova_lease.api_ext.lease_api import errors
from nova_lease import exception

#: The service type in the header (Blazar's, the catalog's).
SERVICE_TYPE = 'reservation'
#: The header, in the request and in every answer.
HEADER = 'OpenStack-API-Version'
VARY_HEADER = 'Vary'
#: Where :func:`negotiate` leaves the version in the WSGI environ.
ENVIRON_KEY = 'nova_lease.microversion'

#: Every version, oldest first, and what it adds.
HISTORY = (
    ('1.0', "Blazar's v1 exactly: /leases, /os-hosts (with /allocations, "
            "/{host_id}/allocation and /properties), Blazar's fields"),
    ('1.1', "leases: lease_type, retries, on_end (in the body and the "
            "answer), status_reason, before_end_date; events: attempts, "
            "last_error, next_attempt_at; best-effort host reservations: "
            "best_effort_hosts"),
    ('1.2', "physical:host reservations: availability_zone, region, "
            "extra_specs, vcpus, memory_mb, disk_gb (in the body and the "
            "answer)"),
    ('1.3', "GET /os-hosts/idle"),
    ('1.4', "GET /usage"),
    ('1.5', "GET /capacity"),
    ('1.6', "GET /offers; leases with a flexible window (start_date "
            "'earliest', duration, earliest_start, latest_start)"),
)
VERSIONS = tuple(v for v, _ in HISTORY)
MIN_VERSION = VERSIONS[0]
MAX_VERSION = VERSIONS[-1]

# What each extension needs (the route table names its own).
LEASE_DETAILS = '1.1'
HOST_REQUEST_KEYS = '1.2'
IDLE_HOSTS = '1.3'
USAGE = '1.4'
CAPACITY = '1.5'
OFFERS = '1.6'


class NotAcceptable(exception.NovaLeaseException):
    msg_fmt = ('%(reason)s; this lease API serves "%(header)s: '
               '%(service)s X.Y" for X.Y from %(min)s to %(max)s, or '
               '"latest"')
    code = 406


class BadVersion(exception.Invalid):
    msg_fmt = ('invalid %(header)s header: %(reason)s (use "%(header)s: '
               '%(service)s X.Y", X.Y from %(min)s to %(max)s)')


def parse(version):
    """A version string ('1.2') as a comparable microversion_parse.Version."""
    return microversion_parse.parse_version_string(version)


def _range():
    return {'header': HEADER, 'service': SERVICE_TYPE, 'min': MIN_VERSION,
            'max': MAX_VERSION}


def negotiate(req):
    """The version ``req`` asks for (also left in its environ).

    :raises NotAcceptable: (406) a version this API does not serve.
    :raises BadVersion: (400) a value that is not a version.
    """
    try:
        version = microversion_parse.extract_version(
            req.headers, SERVICE_TYPE, VERSIONS)
    except ValueError as e:
        raise NotAcceptable(reason=str(e), **_range())
    except TypeError as e:
        raise BadVersion(reason=str(e), **_range())
    req.environ[ENVIRON_KEY] = version
    return version


def requested(req):
    """The version of ``req`` (the minimum before :func:`negotiate`)."""
    version = req.environ.get(ENVIRON_KEY)
    return version if version is not None else parse(MIN_VERSION)


def at_least(req, version):
    """Whether ``req`` was asked at ``version`` ('1.1') or later."""
    return requested(req) >= parse(version)


def add_headers(resp, version):
    """Say in ``resp`` which version it was served at."""
    resp.headers[HEADER] = '%s %s' % (SERVICE_TYPE, version)
    vary = resp.headers.get(VARY_HEADER)
    if not vary:
        resp.headers[VARY_HEADER] = HEADER
    elif HEADER.lower() not in vary.lower():
        resp.headers[VARY_HEADER] = '%s, %s' % (vary, HEADER)
    return resp


def refuse_keys(req, given, version, where):
    """400 when ``given`` (keys with a value) needs ``version``.

    ``where`` names the body ('' or 'reservations[0].').
    """
    if given and not at_least(req, version):
        key = sorted(given)[0]
        raise errors.BadRequest(reason=(
            "'%s%s' needs lease API version %s or later (%s: %s %s); "
            "this request is at %s" % (
                where, key, version, HEADER, SERVICE_TYPE, version,
                requested(req))))
