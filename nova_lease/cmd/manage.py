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

It reads nova.conf like nova-manage does: without --config-file, the
standard locations of project "nova" (~/.nova/nova.conf, ~/nova.conf,
/etc/nova/nova.conf, /etc/nova.conf and their nova.conf.d directories).

Exit codes: 0 success, 1 database error (unreachable, unknown revision,
...), 2 bad command line.
"""

import functools
import logging as std_logging
import sys

from alembic import util as alembic_util
from oslo_config import cfg
from oslo_db import exception as db_exc
from oslo_log import log as logging
import sqlalchemy as sa
import sqlalchemy.exc

from nova_lease import conf as lease_conf
from nova_lease.db import migration

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
        LOG.info('nova_lease database %s is at revision %s',
                 _safe_url(self.url), migration.version(self.url))
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
        'db', dest='command', title='Commands',
        help='Available commands',
        handler=functools.partial(add_db_command_parsers, conf=conf)))
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
    url = _safe_url(lease_conf.connection_url(conf))
    try:
        return func() or 0
    except db_exc.DBConnectionError as e:
        print('%s: cannot connect to the nova_lease database %s: %s'
              % (PROG, url, e.inner_exception or e), file=sys.stderr)
    except (db_exc.DBError, sqlalchemy.exc.SQLAlchemyError) as e:
        print('%s: database error on %s: %s' % (PROG, url, e),
              file=sys.stderr)
    except alembic_util.CommandError as e:
        print('%s: %s' % (PROG, e), file=sys.stderr)
    return 1


if __name__ == '__main__':
    sys.exit(main())
