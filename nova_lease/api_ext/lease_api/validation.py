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
"""Reading request bodies and checking them, and query strings, against
JSON schemas (draft 2020-12, as nova.api.validation).

The router checks a request against the schemas its route declares
before the handler runs: the body once :func:`json_body` has read it,
the query string as a dict of its last value per name (what
``req.GET.get`` gives). The two parsers of lease parameters,
:func:`parse_lease_params` (the ``lease_params`` boot hint: its
schema checked here) and :func:`parse_lease_body` (``POST /leases``:
checked by its route, ``schemas.leases.CREATE``), hand the checked input
to :mod:`nova_lease.params` for its meaning. A refusal
is a 400 in Blazar's shape, in the words its schema node carries: this
module knows no field. The field is named as the user wrote it
(``reservations[0].min``):

* a refused value: :class:`~nova_lease.params.LeaseParamError`
  ``'<field>' <description>, got <JSON type>``, the node's
  ``description`` being the requirement (``'reservations[0].max' must
  be an integer, got a number``); or, for a node with an ``x-reason``
  template (os-hosts and query parameters), :class:`.errors.BadRequest`
  with it (``%(field)s``, ``%(key)s`` (the last key of the field),
  ``%(value)s``/``%(value)r``);
* an unknown key (``"additionalProperties": false``): the node's
  ``x-unknown-key`` template (``%(key)s``: the first unknown field,
  ``%(allowed)s``), by default params' ``'a', 'b': unknown keys; the
  allowed keys are ...``;
* a missing key (``required``): its property's ``x-reason``, else the
  node's ``x-missing`` template (``%(field)s``, ``%(key)s``: the missing
  key), by default params' ``'<field>' is required``;
* a string of format ``text`` (free text) with a control character:
  :func:`nova_lease.params.check_text`'s message.

A schema with ``"x-wrapper": "<key>"`` also takes its content wrapped
as ``{"<key>": {...}}`` (Blazar's ``{"lease": {...}}``): fields are
then named inside the wrapper, and the handler gets the content.

In JSON schemas ``integer`` includes ``1.0``; here, as in Python and
the parsers, it does not. Format ``boolean``: a string oslo.utils reads
strictly as a boolean (``1``, ``true``, ``no``...).
"""

import jsonschema
from oslo_serialization import jsonutils
from oslo_utils import strutils

from nova_lease.api_ext.lease_api import blazar_words
from nova_lease.api_ext.lease_api import errors
from nova_lease.api_ext.lease_api.schemas import lease_params as lp_schemas
from nova_lease import params as lease_params

#: The default ``x-unknown-key`` (params' own words).
UNKNOWN_KEYS = ('%(keys)s: unknown key%(s)s; the allowed keys are '
                '%(allowed)s')
#: The default ``x-missing`` (params' own words).
MISSING = "'%(field)s' is required"

_FORMATS = jsonschema.FormatChecker(formats=())


@_FORMATS.checks('text')
def _is_text(instance):
    return (not isinstance(instance, str) or
            lease_params.bad_character(instance) is None)


@_FORMATS.checks('boolean', raises=ValueError)
def _is_boolean(instance):
    if isinstance(instance, str):
        strutils.bool_from_string(instance, strict=True)
    return True


_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        'integer', lambda _checker, instance: (
            isinstance(instance, int) and not isinstance(instance, bool))))


class Schema(object):
    """A JSON schema ready to check requests (thread-safe)."""

    def __init__(self, schema):
        _Validator.check_schema(schema)
        self.schema = schema
        self._validator = _Validator(schema, format_checker=_FORMATS)
        self._wrapper = schema.get('x-wrapper')

    def validate(self, data):
        """``data`` (unwrapped, see ``x-wrapper``), or raise its 400."""
        wrapped = (self._wrapper is not None and len(data) == 1 and
                   isinstance(data.get(self._wrapper), dict))
        error = next(self._validator.iter_errors(data), None)
        if error is not None:
            path = list(error.absolute_path)[1 if wrapped else 0:]
            raise _refusal(error, path)
        return data[self._wrapper] if wrapped else data


def json_body(req):
    """The request's body: a JSON object, else 400."""
    if not req.body:
        raise errors.BadRequest(reason='the request needs a JSON object body')
    try:
        body = jsonutils.loads(req.body)
    except ValueError as e:
        raise errors.BadRequest(reason='the body is not valid JSON (%s)' % e)
    if not isinstance(body, dict):
        raise errors.BadRequest(reason='the body must be a JSON object')
    return body


def field_name(path):
    """``['reservations', 0, 'min']`` -> ``'reservations[0].min'``."""
    field = ''
    for part in path:
        if isinstance(part, int):
            field += '[%d]' % part
        else:
            field += '.%s' % part if field else part
    return field


#: The params rule of a refusal by a JSON schema keyword.
_RULES = {'type': 'type', 'required': 'required',
          'additionalProperties': 'unknown_key'}


def _refusal(error, path):
    """The 400 to answer for a jsonschema ValidationError."""
    node, keyword, instance = error.schema, error.validator, error.instance
    field = field_name(path)
    if keyword == 'additionalProperties':
        properties = node.get('properties', {})
        unknown = sorted(str(k) for k in instance if k not in properties)
        first = field_name(path + [unknown[0]])
        message = node.get('x-unknown-key', UNKNOWN_KEYS) % {
            'key': first, 'keys': ', '.join("'%s'" % k for k in unknown),
            's': 's' if len(unknown) > 1 else '',
            'allowed': ', '.join(sorted(properties))}
        return lease_params.LeaseParamError(first, 'unknown_key', message)
    if keyword == 'required':
        missing = next(k for k in error.validator_value if k not in instance)
        field = field_name(path + [missing])
        template = node.get('x-missing', MISSING)
        node = node.get('properties', {}).get(missing, {})
        if 'x-reason' not in node:
            return lease_params.LeaseParamError(
                field, 'required', template % {'field': field,
                                               'key': missing})
        path, instance = path + [missing], None
    if keyword == 'format' and error.validator_value == 'text':
        try:
            lease_params.check_text(instance, field)
        except lease_params.LeaseParamError as e:
            return e
    values = {'field': field, 'key': path[-1] if path else '',
              'value': instance}
    if 'x-reason' in node:
        return errors.BadRequest(reason=node['x-reason'] % values)
    rule = _RULES.get(keyword, 'format')
    if 'description' in node:
        return lease_params.LeaseParamError(
            field, rule, "'%s' %s, got %s" % (
                field, node['description'],
                lease_params.json_type(instance)))
    return lease_params.LeaseParamError(field, rule, "'%s': %s" % (
        field, error.message))


_LEASE_PARAMS = Schema(lp_schemas.LEASE_PARAMS)


def parse_lease_params(raw, now, max_duration=None, default_name=None):
    """Parse the ``lease_params`` hint string into LeaseParams: its JSON
    object, its shape (``schemas.lease_params.LEASE_PARAMS``), then its
    meaning (:func:`nova_lease.params.build_lease_params`, whose
    arguments these are).

    :raises LeaseParamError: its message starts with ``lease_params:``.
    """
    try:
        data = lease_params.load_lease_params(raw)
        _LEASE_PARAMS.validate(data)
        return lease_params.build_lease_params(
            data, now, max_duration=max_duration, default_name=default_name)
    except lease_params.LeaseParamError as e:
        raise e.within('lease_params') from None


def parse_lease_body(body, now, max_duration=None):
    """The meaning of a Blazar v1 lease-create body whose shape its route
    checked (``schemas.leases.CREATE``):
    :func:`nova_lease.params.build_lease_body`, which returns
    ``(LeaseParams, reservations)``.

    :raises LeaseParamError: fields named as in Blazar (``start_date``...),
        Blazar's own words first where Blazar has some.
    """
    for key in sorted(lease_params.FLEXIBLE_KEYS):
        # (A flexible body comes here without them: handlers.leases.)
        if body.get(key) is not None:
            raise lease_params.LeaseParamError(
                key, 'unknown_key', "'%s': unknown key, but in a lease "
                "with a flexible window ('start_date': 'earliest')" % key)
    try:
        return lease_params.build_lease_body(body, now,
                                             max_duration=max_duration)
    except lease_params.LeaseParamError as e:
        raise blazar_words.in_blazar_words(e, body) from None
