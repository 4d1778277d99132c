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
"""Schema migrations of the side database (alembic, inside the package).

Every function takes ``url``: an SQLAlchemy URL string, or a
:class:`nova_lease.db.api.Database` (needed for an in-memory SQLite
database, which exists only in its Database's connection).
"""

import contextlib
import os

from alembic import command as alembic_command
from alembic import config as alembic_config
from alembic import migration as alembic_migration
from alembic import script as alembic_script

from nova_lease.db import api
from nova_lease.db import models

ALEMBIC_INI = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           'alembic.ini')


def _config(connection=None):
    # The ini file and script location come from the package path, never
    # from the current directory.
    config = alembic_config.Config(ALEMBIC_INI)
    config.set_main_option(
        'script_location',
        os.path.join(os.path.dirname(ALEMBIC_INI), 'alembic'))
    if connection is not None:
        config.attributes['connection'] = connection
    return config


@contextlib.contextmanager
def _connection(url, writer):
    if isinstance(url, api.Database):
        with url.connection(writer=writer) as conn:
            yield conn
        return
    db = api.Database(url)
    try:
        with db.connection(writer=writer) as conn:
            yield conn
    finally:
        db.dispose()


def upgrade(url, revision='head'):
    """Upgrade the schema to revision (alembic syntax, default head)."""
    with _connection(url, writer=True) as conn:
        alembic_command.upgrade(_config(conn), revision)


def stamp(url, revision='head'):
    """Record revision as the schema's version without running anything."""
    with _connection(url, writer=True) as conn:
        alembic_command.stamp(_config(conn), revision)


def version(url):
    """The schema's current revision, or None for an empty database."""
    with _connection(url, writer=False) as conn:
        context = alembic_migration.MigrationContext.configure(conn)
        return context.get_current_revision()


def head():
    """The newest revision this code knows."""
    script = alembic_script.ScriptDirectory.from_config(_config())
    return script.get_current_head()


def create_schema(url):
    """Create the schema from the models and stamp it at head.

    Faster than upgrade() from scratch; for tests. The test of migrations
    against models shows that both give the same schema.
    """
    with _connection(url, writer=True) as conn:
        models.Base.metadata.create_all(conn)
        alembic_command.stamp(_config(conn), 'head')
        # As the migration that added the table: an identity of its own.
        api.database_identity_create(conn)
