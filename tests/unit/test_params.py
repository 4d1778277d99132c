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

import dataclasses
import datetime
import json

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import testtools
import webob

from nova_lease.api_ext.lease_api import errors
from nova_lease.api_ext.lease_api.schemas import leases as lease_schemas
from nova_lease.api_ext.lease_api import validation
from nova_lease import exception
from nova_lease import params


DT = datetime.datetime
TD = datetime.timedelta
NOW = DT(2026, 6, 1, 12, 0, 0)
#: The route of POST /leases checks a body's shape with it.
_CREATE = validation.Schema(lease_schemas.CREATE)


class ErrorAssertions:

    def assertParamError(self, field, rule, func, *args, **kwargs):
        err = self.assertRaises(params.LeaseParamError, func, *args, **kwargs)
        self.assertEqual((field, rule), (err.field, err.rule), str(err))
        self.assertIn("'%s'" % field, str(err))
        self.assertIsInstance(err, exception.Invalid)
        self.assertEqual(400, err.code)
        return err


class ParseDatetimeTest(ErrorAssertions, testtools.TestCase):

    def test_accepted_forms(self):
        cases = {
            '2026-12-01 16:07': DT(2026, 12, 1, 16, 7),
            '2026-12-01 16:07:30': DT(2026, 12, 1, 16, 7, 30),
            '2013-12-1 16:07': DT(2013, 12, 1, 16, 7),
            '2026-1-2 3:04': DT(2026, 1, 2, 3, 4),
            '2026-12-01T16:07': DT(2026, 12, 1, 16, 7),
            '2026-12-01T16:07:30': DT(2026, 12, 1, 16, 7, 30),
            '2026-12-01T16:07:30.5': DT(2026, 12, 1, 16, 7, 30, 500000),
            '2026-12-01T16:07:30.123456789Z':
                DT(2026, 12, 1, 16, 7, 30, 123456),
            '2026-12-01T16:07:30Z': DT(2026, 12, 1, 16, 7, 30),
            '2026-12-01t16:07z': DT(2026, 12, 1, 16, 7),
            '  2026-12-01 16:07  ': DT(2026, 12, 1, 16, 7),
            '2028-02-29 00:00': DT(2028, 2, 29),
            '1970-01-01 00:00': DT(1970, 1, 1),
        }
        for text, expected in cases.items():
            self.assertEqual(expected, params.parse_datetime(text, 'end'),
                             text)

    def test_offsets_converted_to_utc(self):
        cases = {
            '2026-12-01T16:07:00+02:00': DT(2026, 12, 1, 14, 7),
            '2026-12-01T16:07+0200': DT(2026, 12, 1, 14, 7),
            '2026-12-01T16:07+02': DT(2026, 12, 1, 14, 7),
            '2026-12-01T16:07:00+05:30': DT(2026, 12, 1, 10, 37),
            '2026-12-01T16:07:00-08:00': DT(2026, 12, 2, 0, 7),
            '2026-12-01 16:07 +01:00': DT(2026, 12, 1, 15, 7),
            '2026-01-01T00:30:00+01:00': DT(2025, 12, 31, 23, 30),
        }
        for text, expected in cases.items():
            self.assertEqual(expected, params.parse_datetime(text, 'start'),
                             text)

    def test_impossible_dates(self):
        for text in ('2027-02-29 10:00', '2026-13-01 10:00',
                     '2026-04-31 10:00', '2026-12-01 24:00',
                     '2026-12-01 10:60', '2026-12-01T10:00:61'):
            err = self.assertParamError('end', 'format',
                                        params.parse_datetime, text, 'end')
            self.assertIn('not a valid date', str(err))

    def test_years_out_of_range(self):
        for text in ('1969-12-31 23:59', '0000-01-01 00:00',
                     '1970-01-01T00:30+01:00', '9999-12-31T23:30-01:00'):
            self.assertParamError('start', 'range', params.parse_datetime,
                                  text, 'start')
        self.assertEqual(DT(9999, 12, 31, 23, 59),
                         params.parse_datetime('9999-12-31 23:59', 'x'))

    def test_garbage(self):
        for text in ('tomorrow', '', '2026-12-01', '16:07 2026-12-01',
                     '2026/12/01 16:07', '2026-12-01 16:07 UTC',
                     '10000-01-01 00:00', '2026-12-01T16:07+24:00',
                     '2026-12-01T16:07+02:60',
                     '\uff12\uff10\uff12\uff16-12-01 16:07'):
            self.assertParamError('end', 'format', params.parse_datetime,
                                  text, 'end')

    def test_garbage_message_shows_formats(self):
        err = self.assertParamError('end', 'format', params.parse_datetime,
                                    'tomorrow', 'end')
        self.assertIn("'YYYY-MM-DD HH:MM'", str(err))
        self.assertIn('ISO 8601', str(err))
        self.assertIn("'tomorrow'", str(err))

    def test_not_a_string(self):
        for value in (123, None, True, [], {}, 1.5):
            err = self.assertParamError('end', 'type', params.parse_datetime,
                                        value, 'end')
            self.assertIn('YYYY-MM-DD HH:MM', str(err))


class FormatTest(testtools.TestCase):

    def test_format_datetime_is_blazar_format(self):
        self.assertEqual('2017-12-26T12:00:00.000000',
                         params.format_datetime(DT(2017, 12, 26, 12)))
        self.assertEqual('2017-12-26T12:00:05.000042',
                         params.format_datetime(DT(2017, 12, 26, 12, 0, 5,
                                                   42)))
        self.assertIsNone(params.format_datetime(None))

    def test_format_datetime_aware_to_utc(self):
        tz = datetime.timezone(TD(hours=2))
        self.assertEqual('2017-12-26T10:00:00.000000',
                         params.format_datetime(DT(2017, 12, 26, 12,
                                                   tzinfo=tz)))

    def test_format_short(self):
        self.assertEqual('2026-01-01 10:00',
                         params.format_short(DT(2026, 1, 1, 10)))
        self.assertEqual('2026-01-01 10:00:30',
                         params.format_short(DT(2026, 1, 1, 10, 0, 30)))

    def test_format_duration(self):
        cases = {TD(days=3): '3d', TD(hours=2): '2h', TD(minutes=90): '1h 30m',
                 TD(seconds=61): '1m 1s', TD(days=365, minutes=1): '365d 1m',
                 TD(0): '0s'}
        for delta, expected in cases.items():
            self.assertEqual(expected, params.format_duration(delta))

    @settings(max_examples=60, deadline=None, database=None)
    @given(st.datetimes(min_value=DT(1970, 1, 1),
                        max_value=DT(9999, 12, 31, 23, 59, 59, 999999)))
    def test_round_trip(self, dt):
        self.assertEqual(dt, params.parse_datetime(params.format_datetime(dt),
                                                   'start'))
        short = dt.replace(second=0, microsecond=0)
        self.assertEqual(short, params.parse_datetime(
            params.format_short(short), 'start'))

    @settings(max_examples=60, deadline=None, database=None)
    @given(st.datetimes(min_value=DT(1971, 1, 1),
                        max_value=DT(9998, 12, 31)).map(
                            lambda d: d.replace(microsecond=0)),
           st.integers(min_value=-23 * 60 - 59, max_value=23 * 60 + 59))
    def test_iso_offsets_round_trip(self, dt, minutes):
        tz = datetime.timezone(TD(minutes=minutes))
        text = dt.replace(tzinfo=tz).isoformat()
        self.assertEqual(dt - TD(minutes=minutes),
                         params.parse_datetime(text, 'start'))


class ParseDurationTest(ErrorAssertions, testtools.TestCase):

    def test_accepted(self):
        cases = {3600: TD(hours=1), '3600': TD(hours=1), '90m': TD(hours=1.5),
                 '2h': TD(hours=2), '3d': TD(days=3), ' 2H ': TD(hours=2),
                 '45s': TD(seconds=45), '2 h': TD(hours=2), '+5m': TD(
                     minutes=5), '007m': TD(minutes=7)}
        for value, expected in cases.items():
            self.assertEqual(expected, params.parse_duration(value, 'd'),
                             value)

    def test_zero_and_negative(self):
        for value in (0, '0', '0m', '-0', -5, '-5m', '-1', -10 ** 30,
                      '-' + '9' * 5000 + 'd'):
            self.assertParamError('duration', 'range', params.parse_duration,
                                  value, 'duration')
        self.assertEqual(TD(0), params.parse_duration('0', 'x',
                                                      allow_zero=True))
        self.assertParamError('x', 'range', params.parse_duration, -1, 'x',
                              allow_zero=True)

    def test_wrong_type(self):
        for value in (True, False, 1.5, None, [], {}):
            self.assertParamError('duration', 'type', params.parse_duration,
                                  value, 'duration')

    def test_bad_format(self):
        for value in ('1.5h', '1h30m', '', 'h', '2w', 'two hours', '2 hours'):
            err = self.assertParamError('duration', 'format',
                                        params.parse_duration, value,
                                        'duration')
            self.assertIn("'90m'", str(err))

    def test_huge(self):
        for value in ('99999999999999d', 10 ** 30, '9' * 5000,
                      '99999999999999999999', 10 ** 12 * 86400, '3000000d'):
            self.assertParamError('duration', 'too_long',
                                  params.parse_duration, value, 'duration')
        self.assertEqual(TD(days=2900000),
                         params.parse_duration('2900000d', 'duration'))


class LaterTest(ErrorAssertions, testtools.TestCase):

    def test_within_the_calendar(self):
        self.assertEqual(DT(9999, 12, 31, 23, 0), params.later(
            DT(9999, 12, 30, 23, 0), TD(days=1), 'start'))

    def test_past_the_year_9999_names_the_field(self):
        err = self.assertParamError('start', 'range', params.later,
                                    DT(9999, 12, 31, 23, 0), TD(days=1),
                                    'start', 'the default window')
        self.assertIn('9999-12-31 23:00', str(err))
        self.assertIn('the default window of 1d', str(err))


class TextTest(testtools.TestCase):

    def test_bad_character(self):
        for text, found in (('ok name', None), ('émoji 👍 ok', None),
                            ('zero\u200dwidth joiner', None),
                            ('a\x00b', (1, '\x00')), ('tab\t', (3, '\t')),
                            ('\x7f', (0, '\x7f')), ('c1\x85', (2, '\x85')),
                            ('s\ud800', (1, '\ud800')),
                            ('p\u2029', (1, '\u2029'))):
            self.assertEqual(found, params.bad_character(text), repr(text))

    def test_check_text(self):
        self.assertEqual('fine', params.check_text('fine', 'name'))
        err = self.assertRaises(params.LeaseParamError, params.check_text,
                                'a\x00b', 'name')
        self.assertEqual(('name', 'format'), (err.field, err.rule))
        self.assertIn('U+0000 at position 1', str(err))
        err = self.assertRaises(params.LeaseParamError,
                                validation.parse_lease_params,
                                hint(name='x\ny', duration='1h'), NOW)
        self.assertEqual('name', err.field)
        self.assertTrue(str(err).startswith('lease_params: '))


class LeaseParamsTest(testtools.TestCase):

    def _params(self, **kw):
        values = dict(name='l', start=NOW, end=NOW + TD(hours=5))
        values.update(kw)
        return params.LeaseParams(**values)

    def test_frozen(self):
        lp = self._params()
        self.assertRaises(dataclasses.FrozenInstanceError, setattr, lp,
                          'name', 'x')
        self.assertEqual(TD(hours=5), lp.duration)

    def test_effective_before_end(self):
        lp = self._params()
        self.assertEqual(NOW + TD(hours=4), lp.effective_before_end(60))
        self.assertEqual(NOW + TD(hours=2.5), lp.effective_before_end(150))
        # A short lease: at most half of it before its end, never at its
        # start.
        self.assertEqual(NOW + TD(hours=2.5), lp.effective_before_end(600))
        self.assertEqual(NOW + TD(hours=2.5),
                         lp.effective_before_end(10 ** 12))
        self.assertIsNone(lp.effective_before_end(0))
        hour = self._params(end=NOW + TD(hours=1))
        self.assertEqual(NOW + TD(minutes=30), hour.effective_before_end(60))
        self.assertEqual(NOW + TD(minutes=50), hour.effective_before_end(10))
        odd = self._params(end=NOW + TD(seconds=61))
        self.assertEqual(NOW + TD(seconds=31), odd.effective_before_end(60))
        explicit = self._params(before_end=NOW + TD(hours=1))
        self.assertEqual(NOW + TD(hours=1), explicit.effective_before_end(0))
        self.assertEqual(NOW + TD(hours=1), explicit.effective_before_end(60))


def hint(**values):
    return json.dumps(values)


class ParseLeaseParamsTest(ErrorAssertions, testtools.TestCase):

    def parse(self, raw, **kw):
        return validation.parse_lease_params(raw, NOW, **kw)

    def assertHintError(self, field, rule, raw, **kw):
        err = self.assertParamError(field, rule, self.parse, raw, **kw)
        self.assertTrue(str(err).startswith('lease_params: '), str(err))
        return err

    def test_seed(self):
        lp = self.parse('{"name": "lease1", "start": "now", '
                        '"end": "2026-12-01 16:07"}')
        self.assertEqual(params.LeaseParams(
            name='lease1', start=NOW, end=DT(2026, 12, 1, 16, 7),
            start_now=True), lp)

    def test_start_defaults_to_now(self):
        lp = self.parse(hint(name='a', end='2026-06-01 13:00'))
        self.assertEqual((NOW, True), (lp.start, lp.start_now))
        lp = self.parse(hint(name='a', start=' NOW ', duration='1h'))
        self.assertEqual((NOW, True), (lp.start, lp.start_now))
        self.assertEqual(NOW + TD(hours=1), lp.end)

    def test_future_start(self):
        lp = self.parse(hint(name='a', start='2026-07-01T10:00:00+02:00',
                             duration='3d', before_end=30, on_end='shelve',
                             retries=2))
        self.assertEqual(params.LeaseParams(
            name='a', start=DT(2026, 7, 1, 8), end=DT(2026, 7, 4, 8),
            start_now=False, before_end=DT(2026, 7, 4, 7, 30),
            on_end='shelve', retries=2), lp)

    def test_start_in_past(self):
        err = self.assertHintError('start', 'past', hint(
            name='a', start='2026-06-01 11:58:59', end='2026-06-02 10:00'))
        self.assertIn('in the past', str(err))
        self.assertHintError('start', 'past', hint(
            name='a', start='2013-12-1 16:07', end='2026-12-01 16:07'))

    def test_start_within_grace_is_now(self):
        for start in ('2026-06-01 11:59:01', '2026-06-01 11:59',
                      '2026-06-01 12:00'):
            lp = self.parse(hint(name='a', start=start,
                                 end='2026-06-01 13:00'))
            self.assertEqual((NOW, True), (lp.start, lp.start_now), start)

    def test_end_not_after_start(self):
        err = self.assertHintError('end', 'order', hint(
            name='a', start='2026-06-02 10:00', end='2026-06-01 10:00'))
        self.assertEqual("lease_params: 'end' (2026-06-01 10:00) must be "
                         "after 'start' (2026-06-02 10:00)", str(err))
        self.assertHintError('end', 'order', hint(
            name='a', start='2026-06-02 10:00', end='2026-06-02 10:00'))
        self.assertHintError('end', 'order', hint(
            name='a', end='2026-06-01 11:59:30'))

    def test_end_xor_duration(self):
        self.assertHintError('duration', 'exclusive', hint(
            name='a', end='2026-06-02 10:00', duration='1h'))
        err = self.assertHintError('end', 'required', hint(name='a'))
        self.assertIn("'duration'", str(err))
        self.assertHintError('end', 'required', hint(
            name='a', end=None, duration=None))

    def test_duration_errors(self):
        self.assertEqual(NOW + TD(seconds=7200),
                         self.parse(hint(name='a', duration=7200)).end)
        self.assertHintError('duration', 'range', hint(name='a',
                                                       duration='0'))
        self.assertHintError('duration', 'range', hint(name='a',
                                                       duration=-60))
        self.assertHintError('duration', 'too_long', hint(
            name='a', duration='99999999999999d'))
        self.assertHintError('duration', 'too_long', hint(
            name='a', start='9999-12-30 00:00', duration='2d'))
        self.assertHintError('duration', 'type', hint(name='a',
                                                      duration=True))

    def test_max_duration(self):
        limit = TD(days=365)
        self.parse(hint(name='a', duration='365d'), max_duration=limit)
        self.parse(hint(name='a', end='2027-06-01 12:00'),
                   max_duration=limit)
        err = self.assertHintError('duration', 'too_long', hint(
            name='a', duration='366d'), max_duration=limit)
        self.assertIn('365d', str(err))
        err = self.assertHintError('end', 'too_long', hint(
            name='a', start='2026-07-01 00:00', end='2027-07-01 00:01'),
            max_duration=limit)
        self.assertIn('365d 1m', str(err))
        # None and zero mean no limit.
        for unlimited in (None, TD(0)):
            self.parse(hint(name='a', duration='3650d'),
                       max_duration=unlimited)

    def test_before_end(self):
        base = dict(name='a', start='2026-06-02 10:00', end='2026-06-02 12:00')
        for value, expected in ((30, DT(2026, 6, 2, 11, 30)),
                                (' 120 ', DT(2026, 6, 2, 10)),
                                ('2026-06-02 10:00', DT(2026, 6, 2, 10)),
                                ('2026-06-02T13:59+02:00',
                                 DT(2026, 6, 2, 11, 59))):
            lp = self.parse(hint(before_end=value, **base))
            self.assertEqual(expected, lp.before_end, value)
        self.assertIsNone(self.parse(hint(before_end=None,
                                          **base)).before_end)
        for value in (0, '0', -5, '-5', '-' + '9' * 5000):
            err = self.assertHintError('before_end', 'range',
                                       hint(before_end=value, **base))
            self.assertIn('more than zero', str(err))
        for value in (121, 10 ** 30, '9' * 5000, '+00000000000000000000121',
                      '2026-06-02 12:00', '2026-06-02 09:59',
                      '2026-06-03 10:00'):
            err = self.assertHintError('before_end', 'range',
                                       hint(before_end=value, **base))
            self.assertIn("after 'start' (2026-06-02 10:00) and before 'end' "
                          "(2026-06-02 12:00)", str(err))
        err = self.assertHintError('before_end', 'range',
                                   hint(before_end='121', **base))
        self.assertIn("121 minutes before 'end'", str(err))
        for value in (True, 1.5, [30]):
            err = self.assertHintError('before_end', 'type',
                                       hint(before_end=value, **base))
            self.assertIn("minutes before 'end'", str(err))
        err = self.assertHintError('before_end', 'format',
                                   hint(before_end='soon', **base))
        self.assertIn('YYYY-MM-DD HH:MM', str(err))
        self.assertIn("minutes before 'end'", str(err))
        err = self.assertHintError('before_end', 'format',
                                   hint(before_end='2026-02-30 10:00', **base))
        self.assertIn('not a valid date', str(err))

    def test_on_end(self):
        for action in ('delete', 'shelve'):
            lp = self.parse(hint(name='a', duration='1h', on_end=action))
            self.assertEqual(action, lp.on_end)
        self.assertIsNone(self.parse(hint(name='a', duration='1h')).on_end)
        err = self.assertHintError('on_end', 'choice', hint(
            name='a', duration='1h', on_end='destroy'))
        self.assertIn('delete, shelve', str(err))
        self.assertHintError('on_end', 'type', hint(
            name='a', duration='1h', on_end=True))

    def test_retries(self):
        for n in (0, 3, 100):
            lp = self.parse(hint(name='a', duration='1h', retries=n))
            self.assertEqual(n, lp.retries)
        for n in (101, -1):
            self.assertHintError('retries', 'range', hint(
                name='a', duration='1h', retries=n))
        for n in (True, '3', 1.0):
            self.assertHintError('retries', 'type', hint(
                name='a', duration='1h', retries=n))

    def test_name(self):
        self.assertEqual('x' * 255, self.parse(hint(
            name='x' * 255, duration='1h')).name)
        self.assertHintError('name', 'type', hint(name=5, duration='1h'))
        for bad in ('', '   ', 'x' * 256):
            self.assertHintError('name', 'range', hint(name=bad,
                                                       duration='1h'))

    def test_name_defaults_to_callers(self):
        lp = self.parse(hint(duration='1h'), default_name='vm1')
        self.assertEqual('vm1', lp.name)
        lp = self.parse(hint(name='mine', duration='1h'), default_name='vm1')
        self.assertEqual('mine', lp.name)
        self.assertHintError('name', 'required', hint(duration='1h'))
        self.assertHintError('name', 'required', hint(name=None,
                                                      duration='1h'))

    def test_start_wrong_type(self):
        for value in (123, True, ['now']):
            err = self.assertHintError('start', 'type', hint(
                name='a', start=value, duration='1h'))
            self.assertIn('"now"', str(err))
        self.assertHintError('end', 'type', hint(name='a', end=1893456000))

    def test_unknown_keys(self):
        err = self.assertHintError('foo', 'unknown_key', hint(
            name='a', duration='1h', foo=1))
        self.assertIn('before_end', str(err))
        err = self.assertHintError('bar', 'unknown_key', hint(
            name='a', duration='1h', foo=1, bar=2))
        self.assertIn("'foo'", str(err))
        self.assertHintError('start_date', 'unknown_key', hint(
            name='a', start_date='now', duration='1h'))

    def test_duplicate_key(self):
        self.assertHintError('end', 'duplicate_key',
                             '{"name": "a", "end": "2026-07-01 00:00", '
                             '"end": "2026-08-01 00:00"}')

    def test_json_not_an_object(self):
        for raw in ('[]', '["now"]', '5', 'null', '"x"', 'true'):
            self.assertHintError('lease_params', 'type', raw)

    def test_malformed_json(self):
        for raw in ('{"name": ', "{'name': 'a'}", '', 'now', '[' * 5000,
                    '{"retries": 1' + '0' * 5000 + '}'):
            err = self.assertHintError('lease_params', 'format', raw)
            self.assertIn('not valid JSON', str(err))

    def test_raw_not_a_string(self):
        for raw in ({'name': 'a', 'duration': '1h'}, ['{}'], 5, None, b'{}'):
            self.assertHintError('lease_params', 'type', raw)

    def test_raw_too_long(self):
        raw = hint(name='a', duration='1h', x=' ' * 70000)
        self.assertHintError('lease_params', 'range', raw)


class ParseLeaseBodyTest(ErrorAssertions, testtools.TestCase):

    def body(self, **kw):
        # The shape python-blazarclient sends.
        values = {'name': 'lease1', 'start_date': 'now',
                  'end_date': '2026-06-02 12:00', 'before_end_date': None,
                  'reservations': [{'resource_type': 'physical:host',
                                    'min': 1, 'max': 2}],
                  'events': []}
        values.update(kw)
        return {k: v for k, v in values.items() if v is not Ellipsis}

    def parse(self, body, **kw):
        # As the lease API: the route's schema, then the handler's parse.
        return validation.parse_lease_body(_CREATE.validate(body), NOW, **kw)

    def assertBodyError(self, field, rule, body, **kw):
        err = self.assertParamError(field, rule, self.parse, body, **kw)
        self.assertNotIn('lease_params', str(err))
        return err

    def test_blazarclient_body(self):
        body = self.body(before_end_date='2026-06-02 11:00', on_end='delete',
                         retries=1)
        lp, reservations = self.parse(body)
        self.assertEqual(params.LeaseParams(
            name='lease1', start=NOW, end=DT(2026, 6, 2, 12), start_now=True,
            before_end=DT(2026, 6, 2, 11), on_end='delete', retries=1), lp)
        self.assertEqual(body['reservations'], reservations)
        self.assertIsNot(body['reservations'][0], reservations[0])

    def test_minimal_body(self):
        lp, reservations = self.parse({
            'name': 'l', 'start_date': '2026-06-03 00:00',
            'end_date': '2026-06-04 00:00',
            'reservations': [{'resource_type': 'virtual:instance'}]})
        self.assertEqual((DT(2026, 6, 3), DT(2026, 6, 4), False, None),
                         (lp.start, lp.end, lp.start_now, lp.before_end))

    def test_blazar_field_names(self):
        self.assertBodyError('name', 'required', self.body(name=...))
        self.assertBodyError('name', 'type', self.body(name=5))
        self.assertBodyError('start_date', 'past', self.body(
            start_date='2026-05-01 00:00'))
        self.assertBodyError('start_date', 'type', self.body(start_date=123))
        err = self.assertBodyError('end_date', 'order', self.body(
            end_date='2026-06-01 12:00'))
        self.assertIn("'start_date'", str(err))
        self.assertBodyError('end_date', 'required', self.body(end_date=...))
        self.assertBodyError('end_date', 'format', self.body(
            end_date='next week'))
        self.assertBodyError('end_date', 'too_long', self.body(),
                             max_duration=TD(hours=1))
        self.assertBodyError('before_end_date', 'range', self.body(
            before_end_date='2026-06-02 12:00'))
        self.assertBodyError('before_end_date', 'type', self.body(
            before_end_date=30))
        self.assertBodyError('on_end', 'choice', self.body(on_end='keep'))
        self.assertBodyError('retries', 'type', self.body(retries=True))

    def test_hint_only_keys_refused(self):
        # (duration is a flexible window's: start_date 'earliest'.)
        self.assertBodyError('duration', 'unknown_key', self.body(
            duration='1h'))
        self.assertBodyError('end_date', 'required', self.body(
            end_date=..., duration='1h'))
        self.assertBodyError('start', 'unknown_key', self.body(start='now'))

    def test_no_reservation_is_a_valid_lease(self):
        # As in Blazar: absent, null or an empty array.
        for value in (..., None, []):
            _params, reservations = self.parse(
                self.body(reservations=value))
            self.assertEqual([], reservations)

    def test_reservations(self):
        self.assertBodyError('reservations', 'type',
                             self.body(reservations='physical:host'))
        self.assertBodyError('reservations', 'type',
                             self.body(reservations={'resource_type': 'x'}))
        self.assertBodyError('reservations[0]', 'type',
                             self.body(reservations=[5]))
        self.assertBodyError('reservations[1].resource_type', 'required',
                             self.body(reservations=[
                                 {'resource_type': 'physical:host'}, {}]))
        self.assertBodyError('reservations[0].resource_type', 'type',
                             self.body(reservations=[{'resource_type': 5}]))
        self.assertBodyError('reservations[0].resource_type', 'type',
                             self.body(reservations=[{'resource_type': ''}]))

    def test_events(self):
        self.parse(self.body(events=...))
        self.parse(self.body(events=None))
        self.assertBodyError('events', 'type', self.body(events='x'))
        self.assertBodyError('events', 'unsupported', self.body(events=[
            {'event_type': 'start_lease', 'event_date': '2026-06-02 10:00'}]))

    def test_not_an_object(self):
        # The route refuses it before any schema: a body must be a JSON
        # object.
        for body in (b'null', b'[]', b'"x"'):
            req = webob.Request.blank('/leases', method='POST', body=body)
            self.assertRaises(errors.BadRequest, validation.json_body, req)
