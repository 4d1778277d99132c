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
"""The promise auditor: every broken or endangered promise of a cloud.

``nova-lease-manage audit`` runs :func:`run`; the checks are pure
functions (:mod:`nova_lease.audit.checks`) of what
:mod:`nova_lease.audit.reader` reads from the side database, the compute
API and placement.
"""

from nova_lease.audit import checks
from nova_lease.audit import reader

AuditReadError = reader.AuditReadError
Finding = checks.Finding


class JournalCursor(object):
    """Where a caller that audits again and again is in the engine's
    action journal, and what it already read that cannot change.

    ``since``: the id of the last journal row checked (None: none yet;
    the first audit checks the whole journal). Each :func:`run` with the
    cursor checks only the rows after it, then moves it to the last row
    it read: every row is checked once, by the first audit that sees it.
    (The ``journal`` check of a row depends only on the row, its lease
    and reservation, and the migrations journaled before it, which the
    reader looks up whatever the cursor.) A row committed after a row
    with a higher id (concurrent engines) can be passed over by a
    cursor; an audit without one checks everything.

    ``hints``: {server id: its ``reservation`` boot hint}, the hints
    already read (a server's boot hints never change).
    """

    def __init__(self, since=None):
        self.since = since
        self.hints = {}


def run(conf, now=None, compute=None, placement=None, db=None,
        cursor=None):
    """Audit the cloud; the list of :class:`Finding` (empty: all kept).

    :param conf: ConfigOpts with ``[nova_lease]`` and ``[nova_lease_auth]``
        (the service user the engine uses).
    :param compute: a :class:`nova_lease.compute.ComputeClient` (default:
        from ``[nova_lease_auth]``).
    :param placement: a :class:`nova_lease.audit.reader.PlacementClient`
        (default: from ``[nova_lease_auth]``).
    :param cursor: a :class:`JournalCursor`: check only the journal
        rows after ``cursor.since``, then move it past the rows read
        (default: the whole journal).
    :raises AuditReadError: Nova, placement or the side database could
        not be read.
    """
    state = reader.read_state(conf, db=db, compute_client=compute,
                              placement=placement, now=now, cursor=cursor)
    findings = checks.check(state)
    if cursor is not None and state.actions:
        cursor.since = max(row['id'] for row in state.actions)
    return findings


def format_table(findings):
    """Findings as a human-readable table (one line each)."""
    if not findings:
        return 'No broken or endangered promise found.'
    rows = [('CHECK', 'SUBJECT', 'FINDING')]
    rows.extend((f.check, f.subject, f.message) for f in findings)
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    lines = ['  '.join((r[0].ljust(widths[0]), r[1].ljust(widths[1]), r[2]))
             for r in rows]
    lines.append('%d finding(s).' % len(findings))
    return '\n'.join(lines)
