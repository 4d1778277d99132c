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
"""Schema of the ``lease_params`` boot hint (the JSON object its string
holds), and the property nodes it shares with a lease body
(:data:`.leases.LEASE`): one node per rule, so that a value of the wrong
type is refused in the same words on both paths.

Shape and type only; what the values mean (dates and their order, the
start in the past, durations and their bounds, choices, ranges) is
checked by :mod:`nova_lease.params` on the shape-checked object. JSON
``null`` counts as absent, so every property accepts it. Each node
carries its message (``description``: ``'retries' must be an integer,
got a boolean``; see :mod:`..validation`).
"""

from nova_lease import params

_DATES = params.DATE_FORMATS_HELP

#: A lease's name (its length and blankness are the parser's).
NAME = {'type': ['string', 'null'], 'format': 'text',
        'description': 'must be a string'}
#: ``start``/``start_date``: "now" (any case) or a date.
START = {'type': ['string', 'null'],
         'description': 'must be "now" or a date string'}
#: ``end``/``end_date`` and a lease body's ``before_end_date``.
DATE = {'type': ['string', 'null'],
        'description': 'must be a date string (%s)' % _DATES}
#: ``duration`` (hint only): seconds, or a string such as '2h'.
DURATION = {'type': ['integer', 'string', 'null'],
            'description': "must be a string such as '2h' or an integer "
                           "number of seconds"}
#: The hint's ``before_end``: a date or whole minutes before ``end``.
BEFORE_END_MINUTES = {
    'type': ['integer', 'string', 'null'],
    'description': "must be a date string (%s, or a whole number of "
                   "minutes before 'end')" % _DATES}
ON_END = {'type': ['string', 'null'], 'description': 'must be a string'}
RETRIES = {'type': ['integer', 'null'],
           'description': 'must be an integer'}
#: ``type``/``lease_type``: one of params.LEASE_TYPES (the parser's).
LEASE_TYPE = {'type': ['string', 'null'],
              'description': 'must be a string'}

#: The object of ``--hint lease_params='{...}'``.
LEASE_PARAMS = {
    'type': 'object',
    'additionalProperties': False,
    'properties': {
        'name': NAME,
        'start': START,
        'end': DATE,
        'duration': DURATION,
        'before_end': BEFORE_END_MINUTES,
        'on_end': ON_END,
        'retries': RETRIES,
        'type': LEASE_TYPE,
    },
}
