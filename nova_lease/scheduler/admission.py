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
"""Admission control: does a scheduled lease fit, and where?

Called by whoever records a lease, inside the writer transaction that
records it, so that the chosen hosts' capacity is promised atomically.

NOTE: interface only for now. Until the capacity calendar is wired in,
:func:`allocate_instances` admits everything and promises nothing.
"""

from nova_lease import exception


class NoCapacity(exception.Conflict):
    msg_fmt = ('No host can hold %(what)s from %(start)s to %(end)s: '
               '%(reason)s')


def allocate_instances(session, conf, flavor, count, start, end):
    """Choose hosts for count instances of flavor over [start, end).

    :param session: a writer session of the side database (db.writer()).
    :param conf: the ConfigOpts holding [nova_lease].
    :param flavor: dict with vcpus, memory_mb and disk_gb.
    :param count: number of instances (multi-create).
    :param start: naive UTC datetime; :param end: naive UTC datetime.
    :returns: one allocation dict per instance, without reservation_id:
        {'host', 'start_date', 'end_date', 'vcpus', 'memory_mb',
        'disk_gb'}; an empty list when nothing is promised.
    :raises NoCapacity: (409) when the instances do not fit.
    """
    return []
