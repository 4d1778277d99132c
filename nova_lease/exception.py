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
"""Exceptions shared by every part of nova_lease.

Each condition is a small subclass with a ``msg_fmt`` formatted from the
keyword arguments (the placement/nova pattern). ``code`` is the HTTP status
the lease API answers with when the exception reaches it.
"""


class NovaLeaseException(Exception):
    msg_fmt = 'An unknown nova_lease error occurred.'
    code = 500

    def __init__(self, message=None, **kwargs):
        self.kwargs = kwargs
        if message is None:
            try:
                message = self.msg_fmt % kwargs
            except (KeyError, TypeError):
                message = self.msg_fmt
        self.message = message
        super().__init__(message)

    def __str__(self):
        return self.message


class Invalid(NovaLeaseException):
    msg_fmt = 'Invalid input: %(reason)s'
    code = 400


class NotFound(NovaLeaseException):
    msg_fmt = 'Resource could not be found.'
    code = 404


class Conflict(NovaLeaseException):
    msg_fmt = 'Conflict: %(reason)s'
    code = 409


class Forbidden(NovaLeaseException):
    msg_fmt = 'Forbidden: %(reason)s'
    code = 403


class DatabaseNotConfigured(NovaLeaseException):
    """``[nova_lease_database] connection`` is empty: refuse to start."""

    msg_fmt = ('[nova_lease_database] connection is not set. nova-api, '
               'nova-scheduler and nova-lease-engine must all use the same '
               'side database: set [nova_lease_database] connection in '
               'nova.conf to '
               'its SQLAlchemy URL (e.g. mysql+pymysql://nova_lease:PASSWORD'
               '@DBHOST/nova_lease or postgresql+psycopg2://nova_lease:'
               'PASSWORD@DBHOST/nova_lease) and run nova-lease-manage db '
               'sync. On a single all-in-one host, name an SQLite file '
               'explicitly instead (e.g. '
               'sqlite:////var/lib/nova/nova_lease.sqlite).')


class DatabaseNotReady(NovaLeaseException):
    """The side database is reachable but has no (current) schema."""

    msg_fmt = ('The nova_lease database %(url)s has no identity row: its '
               'schema is missing or older than this code. Run '
               'nova-lease-manage db sync (with the same [nova_lease] '
               'connection) first.')


class ConfigurationError(NovaLeaseException):
    """Options that contradict each other: refuse to start."""

    msg_fmt = '%(reason)s'
