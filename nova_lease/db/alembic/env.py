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
"""Alembic environment of the nova_lease side database.

nova_lease.db.migration passes an open connection in
``config.attributes['connection']`` (already in a transaction). Without
one, the URL comes from the ``sqlalchemy.url`` main option (for the plain
alembic command, e.g. ``alembic -c nova_lease/db/alembic.ini -x
url=sqlite:///x.db upgrade head``, or ``--sql`` for offline SQL).
"""

from alembic import context

from nova_lease.db import models

config = context.config
target_metadata = models.Base.metadata


def _url():
    url = (context.get_x_argument(as_dictionary=True).get('url') or
           config.get_main_option('sqlalchemy.url'))
    if not url:
        raise RuntimeError('No database URL: use nova-lease-manage db sync, '
                           'or pass -x url=<SQLAlchemy URL>.')
    return url


def _configure_and_run(connection):
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things: alembic copies the table.
        render_as_batch=connection.dialect.name == 'sqlite',
        compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline():
    context.configure(url=_url(), target_metadata=target_metadata,
                      literal_binds=True,
                      dialect_opts={'paramstyle': 'named'})
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online():
    connection = config.attributes.get('connection')
    if connection is not None:
        _configure_and_run(connection)
        return
    # Imported here: the offline mode needs no engine.
    from nova_lease.db import api

    db = api.Database(_url())
    try:
        with db.connection() as connection:
            _configure_and_run(connection)
    finally:
        db.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
