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
"""nova-lease-manage: administration of the nova_lease side database.

    nova-lease-manage [--config-file nova.conf] db sync [--revision REV]
    nova-lease-manage [--config-file nova.conf] db version
    nova-lease-manage [--config-file nova.conf] db stamp REV
    nova-lease-manage [--config-file nova.conf] process list
    nova-lease-manage [--config-file nova.conf] audit [--format table|json]
        [--since ID]
    nova-lease-manage [--config-file nova.conf] journal purge --before B
        [--dry-run] [--batch-size N]
    nova-lease-manage [--config-file nova.conf] capacity [--start S]
        [--end E] [--step 1h] [--format table|json|svg|html] [--output FILE]
        [--host H] [--aggregate A] [--availability-zone Z]
        [--resource R[,R]] [--detail]

It reads nova.conf like nova-manage does: without --config-file, the
standard locations of project "nova" (~/.nova/nova.conf, ~/nova.conf,
/etc/nova/nova.conf, /etc/nova.conf and their nova.conf.d directories).
``[nova_lease_database] connection`` must be set (there is no implicit
database).

Exit codes: 0 success, 1 configuration or database error (no connection
set, unreachable, unknown revision, ...), 2 bad command line. ``audit``:
0 nothing found, 1 findings, 2 bad command line, 3 the side database,
Nova or placement could not be read (or nothing is configured).
``capacity``: 0 success, 2 bad command line or query (the message names
the option), 3 the side database, Nova or placement could not be read.
``journal purge``: 0 success, 1 database error, 2 bad command line.
"""

import datetime
import functools
import logging as std_logging
import re
import sys

from oslo_serialization import jsonutils

from alembic import util as alembic_util
from oslo_config import cfg
from oslo_db import exception as db_exc
from oslo_log import log as logging
from oslo_utils import timeutils
import sqlalchemy as sa
import sqlalchemy.exc

from nova_lease import audit
from nova_lease.calendar import capacity as capacity_core
from nova_lease.cmd import capacity
from nova_lease import conf as lease_conf
from nova_lease.db import api as db_api
from nova_lease.db import migration
from nova_lease import exception
from nova_lease import params as lease_params
from nova_lease import registration

LOG = logging.getLogger(__name__)

PROG = 'nova-lease-manage'


class DbCommands(object):
    def __init__(self, conf):
        self.conf = conf

    @property
    def url(self):
        return lease_conf.connection_url(self.conf)

    def db_sync(self):
        migration.upgrade(self.url, revision=self.conf.command.revision)
        db = db_api.Database(self.url,
                             **lease_conf.database_options(self.conf))
        try:
            identity = db_api.database_identity(db)
        except (db_exc.DBError, sqlalchemy.exc.SQLAlchemyError):
            identity = None     # a revision before the identity
        finally:
            db.dispose()
        LOG.info('nova_lease database %s is at revision %s, identity %s',
                 _safe_url(self.url), migration.version(self.url),
                 identity)
        return 0

    def db_version(self):
        if not self.conf.debug:
            # Only the revision: alembic's INFO lines are noise here.
            std_logging.getLogger('alembic').setLevel(std_logging.WARNING)
        print(migration.version(self.url))
        return 0

    def db_stamp(self):
        migration.stamp(self.url, self.conf.command.revision)
        return 0


class ProcessCommands(object):
    def __init__(self, conf):
        self.conf = conf

    def process_list(self):
        db = db_api.Database(lease_conf.connection_url(self.conf),
                             **lease_conf.database_options(self.conf))
        try:
            db, identity = registration.check_database(self.conf, db)
            rows = db_api.process_list(db)
        finally:
            db.dispose()
        now = timeutils.utcnow()
        engine_up = datetime.timedelta(
            seconds=self.conf.nova_lease.engine_heartbeat_timeout)
        nova_up = datetime.timedelta(
            seconds=registration.NOVA_HEARTBEAT_INTERVAL
            * registration.UP_INTERVALS)
        print('nova_lease database %s, identity %s'
              % (_safe_url(lease_conf.connection_url(self.conf)), identity))
        table = [('BINARY', 'HOST', 'PID', 'NAME', 'STARTED',
                  'LAST HEARTBEAT', 'STATE')]
        for row in rows:
            if row['stopped_at'] is not None:
                state = 'stopped'
                if row['stop_reason'] and row['stop_reason'] != 'stopped':
                    state = 'down (%s)' % row['stop_reason']
            else:
                limit = (engine_up if row['binary'] == registration.ENGINE
                         else nova_up)
                state = 'up' if now - row['heartbeat_at'] <= limit else (
                    'down (no heartbeat)')
            table.append((row['binary'], row['host'], str(row['pid']),
                          row['name'] or '-', _time(row['started_at']),
                          _time(row['heartbeat_at']), state))
        widths = [max(len(line[i]) for line in table)
                  for i in range(len(table[0]) - 1)]
        for line in table:
            print('  '.join(cell.ljust(width) for cell, width
                            in zip(line, widths)) + '  ' + line[-1])
        return 0


class AuditCommands(object):
    #: Exit code when the audit could not read what it needs.
    READ_ERROR = 3

    def __init__(self, conf):
        self.conf = conf

    def audit(self):
        since = self.conf.command.since
        if since is not None and since < 0:
            print('%s: audit: --since must be an action id (0 or more), '
                  'got %d' % (PROG, since), file=sys.stderr)
            return 2
        cursor = audit.JournalCursor(since)
        try:
            findings = audit.run(self.conf, cursor=cursor)
        except audit.AuditReadError as e:
            print('%s: audit: cannot read the cloud: %s' % (PROG, e),
                  file=sys.stderr)
            return self.READ_ERROR
        if self.conf.command.format == 'json':
            print(jsonutils.dumps({'findings': [f.to_dict()
                                                for f in findings],
                                   'journal_last_id': cursor.since},
                                  indent=2, sort_keys=True))
        else:
            print(audit.format_table(findings))
            if cursor.since is not None:
                print('Engine action journal checked through action id %d '
                      '(next: --since %d).' % (cursor.since, cursor.since))
        return 1 if findings else 0


def add_audit_command_parsers(subparsers, conf):
    commands = AuditCommands(conf)
    help = ('Check that every admitted promise is kept and that nothing '
            'outside a lease is touched: reads the side database, the '
            'compute API and placement with the [nova_lease_auth] service '
            'user and reports every over-committed future instant, '
            'server on a leased or free-pool host that does not belong '
            'there, leased server out of step with its lease, host in the '
            'wrong aggregate and stuck or overdue event. Exit code 0: '
            'nothing found, 1: findings, 3: could not read.')
    parser = subparsers.add_parser('audit', help=help, description=help)
    parser.add_argument('--format', choices=('table', 'json'),
                        default='table',
                        help='table (default) for people, json for '
                             'scripts')
    parser.add_argument('--since', type=int, default=None, metavar='ID',
                        help='check only the engine action journal rows '
                             'after this action id (the last id an '
                             'earlier audit checked, which every audit '
                             'prints: "journal_last_id" in json); every '
                             'other check is complete. Default: the whole '
                             'journal')
    parser.set_defaults(func=commands.audit, error_code=3)


class JournalCommands(object):
    #: Exit code of a bad command line.
    USAGE = 2

    _AGE_RE = re.compile(r'(\d+)\s*([smhd])', re.ASCII | re.IGNORECASE)

    def __init__(self, conf):
        self.conf = conf

    def _cutoff(self, value, now):
        """--before: an age (a number and a unit) or a date, not after
        now.
        """
        if self._AGE_RE.fullmatch(value.strip()):
            return now - lease_params.parse_duration(value, '--before')
        if re.fullmatch(r'\s*\d+\s*', value):
            raise lease_params.LeaseParamError(
                '--before', 'format',
                "'--before' %s: give an age with its unit (e.g. '30d', "
                "'12h') or a date" % value.strip())
        cutoff = lease_params.parse_datetime(value, '--before')
        if cutoff > now:
            raise lease_params.LeaseParamError(
                '--before', 'range',
                "'--before' (%s) is in the future" % value.strip())
        return cutoff

    def journal_purge(self):
        args = self.conf.command
        now = timeutils.utcnow()
        try:
            cutoff = self._cutoff(args.before, now)
        except lease_params.LeaseParamError as e:
            print('%s: journal purge: %s' % (PROG, e), file=sys.stderr)
            return self.USAGE
        if args.batch_size < 1:
            print('%s: journal purge: --batch-size must be 1 or more'
                  % PROG, file=sys.stderr)
            return self.USAGE
        db = db_api.Database(lease_conf.connection_url(self.conf),
                             **lease_conf.database_options(self.conf))
        try:
            count = db_api.action_purge(db, cutoff,
                                        batch_size=args.batch_size,
                                        dry_run=args.dry_run)
        finally:
            db.dispose()
        print('%s %d engine action journal row(s) created before %s UTC.'
              % ('Would purge' if args.dry_run else 'Purged', count,
                 cutoff.strftime('%Y-%m-%d %H:%M:%S')))
        return 0


def add_journal_command_parsers(subparsers, conf):
    commands = JournalCommands(conf)
    help = ('The engine action journal (engine_actions): every change the '
            'engine asked of Nova, kept for the auditor.')
    parser = subparsers.add_parser('journal', help=help, description=help)
    parser.set_defaults(func=None)
    journal_parsers = parser.add_subparsers(description='journal commands')
    help = ('Remove the journal rows created before --before: the rows of '
            'the idle-host pass and of leases that are TERMINATED or '
            'gone. A lease\'s rows go together, once all of them are older '
            'than --before; the rows of a lease not yet TERMINATED and '
            'the rows still pending are never removed. Run it from cron, '
            'as nova-manage db purge. Exit code 0: done, 1: database '
            'error, 2: bad command line.')
    purge = journal_parsers.add_parser('purge', help=help, description=help)
    purge.add_argument('--before', required=True,
                       help='an age (a number followed by s, m, h or d, '
                            'e.g. 30d) or a date (UTC, "YYYY-MM-DD HH:MM" '
                            'or ISO 8601) not in the future: rows created '
                            'before it may go')
    purge.add_argument('--dry-run', action='store_true',
                       help='only count the rows that would go')
    purge.add_argument('--batch-size', type=int, default=1000, metavar='N',
                       help='rows removed per transaction (default 1000)')
    purge.set_defaults(func=commands.journal_purge)


class CapacityCommands(object):
    #: Exit codes: a bad query; the cloud could not be read.
    BAD_QUERY = 2
    READ_ERROR = 3

    def __init__(self, conf):
        self.conf = conf

    def _query(self, now):
        args = self.conf.command
        start = now if args.start in (None, 'now') else \
            lease_params.parse_datetime(args.start, '--start')
        end = lease_params.later(
            start, capacity_core.DEFAULT_WINDOW, '--start',
            'the default window (no --end)') if args.end is None else \
            lease_params.parse_datetime(args.end, '--end')
        step = lease_params.parse_duration(args.step, '--step')
        filters = {key: getattr(args, key) for key in (
            'host', 'aggregate', 'availability_zone')
            if getattr(args, key)}
        if args.resource:
            filters['resources'] = [r.strip() for r in
                                    args.resource.split(',') if r.strip()]
        return start, end, step, filters

    def capacity(self):
        args = self.conf.command
        formatter = capacity.FORMATTERS[args.format]
        now = timeutils.utcnow()
        try:
            start, end, step, filters = self._query(now)
            # (Checked before anything is read.)
            capacity_core.check_resources(filters.get('resources'))
            capacity_core.step_bounds(start, end, step)
            body = capacity.report(
                self.conf, start, end, step, now=now,
                detail=bool(args.detail or formatter.detail), **filters)
        except lease_params.LeaseParamError as e:
            print('%s: capacity: %s' % (PROG, e), file=sys.stderr)
            return self.BAD_QUERY
        except capacity_core.CapacityError as e:
            print('%s: capacity: --%s: %s' % (
                PROG, e.field.replace('_', '-'), e.message),
                file=sys.stderr)
            return self.BAD_QUERY
        except audit.AuditReadError as e:
            print('%s: capacity: cannot read the cloud: %s' % (PROG, e),
                  file=sys.stderr)
            return self.READ_ERROR
        text = formatter.render(body)
        if args.output:
            mode = 'wb' if isinstance(text, bytes) else 'w'
            with open(args.output, mode) as f:
                f.write(text)
                if mode == 'w' and not text.endswith('\n'):
                    f.write('\n')
        else:
            print(text)
        return 0


def add_capacity_command_parsers(subparsers, conf):
    commands = CapacityCommands(conf)
    help = ('Capacity over time: per step and in total, per resource '
            '(vcpus, memory_mb, disk_gb, hosts) the capacity, what '
            'unleased work uses, what leases promise and what is free; '
            'the body of GET /os-reservation/capacity, read from the '
            'side database (a full read of the calendar) and from the '
            'compute API and placement with the [nova_lease_auth] service '
            'user. Exit code 0: done, 2: bad query, 3: could not read.')
    parser = subparsers.add_parser('capacity', help=help, description=help)
    parser.add_argument('--start', default=None,
                        help='start of the window: a date (UTC, '
                             '"YYYY-MM-DD HH:MM" or ISO 8601) or "now" '
                             '(default)')
    parser.add_argument('--end', default=None,
                        help='end of the window (default: a day after '
                             'the start)')
    parser.add_argument('--step', default=capacity_core.DEFAULT_STEP,
                        help='step: seconds or a number followed by s, m, '
                             'h or d (default 1h); at most %d steps'
                             % capacity_core.MAX_STEPS)
    parser.add_argument('--format', choices=sorted(capacity.FORMATTERS),
                        default='table',
                        help='table (default) for people, json for '
                             'scripts (the API\'s body), svg for the '
                             'picture of hosts and leases over time, html '
                             'for a self-contained page with the picture '
                             'and the totals (svg and html always have the '
                             'per-host details)')
    parser.add_argument('--output', default=None,
                        help='write to this file instead of stdout')
    parser.add_argument('--host', default=None,
                        help='only this host (hypervisor hostname or '
                             'compute service host)')
    parser.add_argument('--aggregate', default=None,
                        help='only the hosts of this aggregate')
    parser.add_argument('--availability-zone', dest='availability_zone',
                        default=None,
                        help='only the hosts of this availability zone')
    parser.add_argument('--resource', default=None,
                        help='comma-separated resources among %s (default '
                             'all)' % ', '.join(capacity_core.RESOURCES))
    parser.add_argument('--detail', action='store_true',
                        help='add the per-host details (host_details) to '
                             'the json format')
    parser.set_defaults(func=commands.capacity, error_code=3)


def _time(value):
    return value.strftime('%Y-%m-%d %H:%M:%S') if value else '-'


def add_process_command_parsers(subparsers, conf):
    commands = ProcessCommands(conf)
    help = ('Processes that use this nova_lease database (nova-api, '
            'nova-scheduler, nova-lease-engine).')
    parser = subparsers.add_parser('process', help=help, description=help)
    parser.set_defaults(func=None)
    process_parsers = parser.add_subparsers(description='process commands')
    help = ('List every process registered in this database (one row per '
            'process start), with its last heartbeat and whether it is up, '
            'and the identity of the database.')
    listing = process_parsers.add_parser('list', help=help,
                                         description=help)
    listing.set_defaults(func=commands.process_list)


def add_command_parsers(subparsers, conf):
    add_db_command_parsers(subparsers, conf)
    add_process_command_parsers(subparsers, conf)
    add_audit_command_parsers(subparsers, conf)
    add_journal_command_parsers(subparsers, conf)
    add_capacity_command_parsers(subparsers, conf)


def add_db_command_parsers(subparsers, conf):
    commands = DbCommands(conf)
    parser = subparsers.add_parser(
        'db', help='Side database commands.')
    parser.set_defaults(func=None)
    db_parsers = parser.add_subparsers(description='database commands')

    help = ('Create the schema of the nova_lease database, or upgrade it '
            'to this version.')
    sync = db_parsers.add_parser('sync', help=help, description=help)
    sync.add_argument('--revision', default='head',
                      help='Alembic revision to upgrade to (default: head).')
    sync.set_defaults(func=commands.db_sync)

    help = ('Print the schema revision of the nova_lease database ("None" '
            'before the first db sync).')
    version = db_parsers.add_parser('version', help=help, description=help)
    version.set_defaults(func=commands.db_version)

    help = 'Record a schema revision without running migrations.'
    stamp = db_parsers.add_parser('stamp', help=help, description=help)
    stamp.add_argument('revision', help='the revision to record')
    stamp.set_defaults(func=commands.db_stamp)


def _safe_url(url):
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except sqlalchemy.exc.ArgumentError:
        return '<invalid URL>'


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    conf = cfg.ConfigOpts()
    lease_conf.register_opts(conf)
    lease_conf.register_nova_paths(conf)
    logging.register_options(conf)
    # Logs go to stderr (unless nova.conf names a log file): stdout is for
    # results, e.g. the revision that "db version" prints.
    conf.set_default('use_stderr', True)
    conf.register_cli_opt(cfg.SubCommandOpt(
        'category', dest='command', title='Commands',
        help='Available commands',
        handler=functools.partial(add_command_parsers, conf=conf)))
    try:
        conf(argv, project='nova', prog=PROG)
    except cfg.Error as e:
        print('%s: %s' % (PROG, e), file=sys.stderr)
        return 2
    logging.setup(conf, PROG)

    func = getattr(conf.command, 'func', None)
    if func is None:
        print('%s: give a command, e.g. "db sync"; see --help' % PROG,
              file=sys.stderr)
        return 2
    failed = getattr(conf.command, 'error_code', 1)
    try:
        url = _safe_url(lease_conf.connection_url(conf))
    except exception.DatabaseNotConfigured as e:
        print('%s: %s' % (PROG, e), file=sys.stderr)
        return failed
    try:
        return func() or 0
    except exception.NovaLeaseException as e:
        print('%s: %s' % (PROG, e), file=sys.stderr)
    except db_exc.DBConnectionError as e:
        print('%s: cannot connect to the nova_lease database %s: %s'
              % (PROG, url, e.inner_exception or e), file=sys.stderr)
    except (db_exc.DBError, sqlalchemy.exc.SQLAlchemyError) as e:
        print('%s: database error on %s: %s' % (PROG, url, e),
              file=sys.stderr)
    except alembic_util.CommandError as e:
        print('%s: %s' % (PROG, e), file=sys.stderr)
    return failed


if __name__ == '__main__':
    sys.exit(main())
