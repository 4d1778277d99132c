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
"""The member-isolation table: every request a plain member of project B
can make against project A's leases, servers and hosts, and its answer.

Read by tests/functional/test_member_isolation.py (which sends every row
as B in a world where A holds one lease of each kind) and by
tests/unit/test_isolation_table.py (every route of the lease API's
router has at least one row: a new endpoint without a row fails).

A row's ``path`` is relative to Nova's API root (``/os-reservation/...``
for the lease API, ``/servers...`` for the nova-api paths our paste
filter extends) and may name A's things in braces:

``{lease}``         each of A's lease ids (host, boot-hint instance,
                    flavor:instance, future host, future leased boot);
``{reservation}``   each of A's reservation ids, with its ``{lease}``;
``{server}``        each of A's server ids (a future lease's too);
``{host_id}``       the registered-host id of each host A's leases hold;
``{host}``          the name of each host A's leases hold;
``{project}``       A's project id;
``{flavor}``        the private flavor of A's flavor:instance reservation;
``{host_res}``      the id of A's active host reservation.

A row with a placeholder is also sent with a value A does not have (a
fresh uuid, an unknown host): both answers must be the same but for the
value sent (nothing tells B that A's thing exists). No answer may carry
any of A's ids, names, hosts or project id other than what B sent.

``route``: (method, template) of
:data:`nova_lease.api_ext.lease_api.router.ROUTES`, or
``('NOVA', <what>)`` for a nova-api path. ``needs``: a finding whose fix
is on another branch; the row is skipped until its fix is merged (see
:func:`pending`). ``same=False``: the answers to A's value and to an
unknown one may differ in text (Nova's own, not our filter's), not in
status. ``{end}``, ``{later}`` and ``{image}`` are B's own values (a
lease end and a later start in the window, a bootable image).
"""

import collections

LEASES = '/os-reservation'

Row = collections.namedtuple(
    'Row', ['route', 'method', 'path', 'body', 'expect', 'needs', 'same'],
    defaults=(None, None, True))


def _lease_body(reservations, name='b-lease', start='now', end='{end}',
                **extra):
    body = {'name': name, 'start_date': start, 'end_date': end,
            'reservations': reservations, 'events': []}
    body.update(extra)
    return body


def _host_res(count=1, **extra):
    res = {'resource_type': 'physical:host', 'min': count, 'max': count,
           'hypervisor_properties': '', 'resource_properties': ''}
    res.update(extra)
    return res


def _server(name='b-vm', flavor='1', hints=None, **extra):
    body = {'server': dict({'name': name, 'flavorRef': flavor,
                            'imageRef': '{image}', 'networks': 'none'},
                           **extra)}
    if hints is not None:
        body['os:scheduler_hints'] = hints
    return body


FORBIDDEN = (403,)
NOT_FOUND = (404,)

ROWS = [
    # -- /capacity ---------------------------------------------------------
    Row(('GET', '/capacity'), 'GET', LEASES + '/capacity', None, (200,)),
    Row(('GET', '/capacity'), 'GET', LEASES + '/capacity?detail=hosts',
        None, FORBIDDEN),
    Row(('GET', '/capacity'), 'GET', LEASES + '/capacity?host={host}',
        None, FORBIDDEN),
    Row(('GET', '/capacity'), 'GET',
        LEASES + '/capacity?aggregate={host_res}', None, FORBIDDEN),
    # A zone of the whole cloud (five hosts) is as large as the member
    # view; C1: a smaller one is refused (403), never shown.
    Row(('GET', '/capacity'), 'GET',
        LEASES + '/capacity?availability_zone=nova', None, (200, 403)),
    Row(('GET', '/capacity'), 'GET',
        LEASES + '/capacity?availability_zone=a-zone', None, (400, 403)),
    # -- /leases -----------------------------------------------------------
    Row(('GET', '/leases'), 'GET', LEASES + '/leases', None, (200,)),
    Row(('GET', '/leases'), 'GET', LEASES + '/leases?all_projects=1', None,
        FORBIDDEN),
    Row(('GET', '/leases'), 'GET', LEASES + '/leases?all_tenants=1', None,
        FORBIDDEN),
    Row(('GET', '/leases'), 'GET', LEASES + '/leases?project_id={project}',
        None, (200, 400)),
    # Not enough hosts: the refusal names no holder.
    Row(('POST', '/leases'), 'POST', LEASES + '/leases',
        _lease_body([_host_res(5)]), (409,)),
    # A's host by name: refused without telling who holds it. (That a
    # named host is reservable and busy then is what any admission
    # answers, 201 or 409, as Blazar's does: the text may differ from an
    # unknown name's, never name a project, lease or server.)
    Row(('POST', '/leases'), 'POST', LEASES + '/leases',
        _lease_body([_host_res(
            1, hypervisor_properties='["=", "$hypervisor_hostname", '
                                     '"{host}"]')]), (409,), same=False),
    # A's private reservation flavor is no flavor B may book.
    Row(('POST', '/leases'), 'POST', LEASES + '/leases',
        _lease_body([{'resource_type': 'flavor:instance',
                      'flavor_id': '{flavor}', 'amount': 1,
                      'affinity': None, 'resource_properties': ''}]),
        (400, 404)),
    # Best-effort host leases are admin-only (F1), refusals redacted (F2).
    Row(('POST', '/leases'), 'POST', LEASES + '/leases',
        _lease_body([_host_res(1)], lease_type='best_effort'),
        (400, 403), needs='F1'),
    Row(('GET', '/leases/{lease_id}'), 'GET', LEASES + '/leases/{lease}',
        None, NOT_FOUND),
    Row(('PUT', '/leases/{lease_id}'), 'PUT', LEASES + '/leases/{lease}',
        {'name': 'taken-by-b'}, NOT_FOUND),
    Row(('PUT', '/leases/{lease_id}'), 'PUT', LEASES + '/leases/{lease}',
        {'end_date': '{end}'}, NOT_FOUND),
    Row(('DELETE', '/leases/{lease_id}'), 'DELETE',
        LEASES + '/leases/{lease}', None, NOT_FOUND),
    # -- /os-hosts (admin only) -------------------------------------------
    Row(('GET', '/os-hosts'), 'GET', LEASES + '/os-hosts', None, FORBIDDEN),
    Row(('POST', '/os-hosts'), 'POST', LEASES + '/os-hosts',
        {'name': '{host}'}, FORBIDDEN),
    Row(('GET', '/os-hosts/allocations'), 'GET',
        LEASES + '/os-hosts/allocations', None, FORBIDDEN),
    Row(('GET', '/os-hosts/allocations'), 'GET',
        LEASES + '/os-hosts/allocations?lease_id={lease}', None, FORBIDDEN),
    Row(('GET', '/os-hosts/idle'), 'GET', LEASES + '/os-hosts/idle', None,
        FORBIDDEN),
    Row(('GET', '/os-hosts/properties'), 'GET',
        LEASES + '/os-hosts/properties', None, FORBIDDEN),
    Row(('GET', '/os-hosts/{host_id}/allocation'), 'GET',
        LEASES + '/os-hosts/{host_id}/allocation', None, FORBIDDEN),
    Row(('GET', '/os-hosts/{host_id}'), 'GET',
        LEASES + '/os-hosts/{host_id}', None, FORBIDDEN),
    Row(('PUT', '/os-hosts/{host_id}'), 'PUT',
        LEASES + '/os-hosts/{host_id}', {'values': {'b': 'x'}}, FORBIDDEN),
    Row(('DELETE', '/os-hosts/{host_id}'), 'DELETE',
        LEASES + '/os-hosts/{host_id}', None, FORBIDDEN),
    # -- /offers -----------------------------------------------------------
    # B's offers count hosts and name none (nor A's leases or project).
    Row(('GET', '/offers'), 'GET', LEASES + '/offers?resource_type='
        'physical:host&min=1&max=1&duration=1h', None, (200,)),
    Row(('GET', '/offers'), 'GET', LEASES + '/offers?resource_type='
        'virtual:instance&amount=1&vcpus=1&memory_mb=128&disk_gb=1'
        '&duration=2h', None, (200,)),
    # A's host by name: offers (or none, with a reason) as admission
    # would answer, naming no project, lease or server.
    Row(('GET', '/offers'), 'GET', LEASES + '/offers?resource_type='
        'physical:host&min=1&max=1&duration=1h&hypervisor_properties='
        '%5B%22%3D%22%2C%22%24hypervisor_hostname%22%2C%22{host}%22%5D',
        None, (200,), same=False),
    # A flexible lease of B's that nothing holds: a 409 whose next
    # offers name nothing of A's.
    Row(('POST', '/leases'), 'POST', LEASES + '/leases',
        {'name': 'b-flex', 'start_date': 'earliest', 'duration': '1h',
         'reservations': [_host_res(5)]}, (409,)),
    # -- /usage ------------------------------------------------------------
    Row(('GET', '/usage'), 'GET', LEASES + '/usage', None, (200,)),
    Row(('GET', '/usage'), 'GET', LEASES + '/usage?project_id={project}',
        None, FORBIDDEN),
    # -- nova-api paths our paste filter extends ----------------------------
    # A boot onto A's host reservation: never placed there (a 202 whose
    # server ends in ERROR, checked by the test, or a refusal).
    Row(('NOVA', 'POST /servers'), 'POST', '/servers',
        _server(hints={'reservation': '{host_res}'}), (202, 400, 403, 404)),
    # A's reservation flavor (a private flavor): no access.
    Row(('NOVA', 'POST /servers'), 'POST', '/servers',
        _server(flavor='{flavor}'), (400, 403, 404)),
    # The internal hints are the filter's own: a 400 from anyone.
    Row(('NOVA', 'POST /servers'), 'POST', '/servers',
        _server(hints={'nova_lease_id': '{lease}'}), (400,)),
    Row(('NOVA', 'POST /servers'), 'POST', '/servers',
        _server(hints={'nova_lease_reservation': '{reservation}'}),
        (400,)),
    # A leased boot of B's own that no host can hold: from now, it is
    # left to the scheduler (the server ends in ERROR, checked by the
    # test); from later, admission refuses it (409) naming no host
    # (N1: it named every registered host).
    Row(('NOVA', 'POST /servers'), 'POST', '/servers',
        _server(flavor='b-huge', hints={
            'reserved': 'True',
            'lease_params': '{"name": "b-big", "duration": "1h"}'}),
        (202, 400, 403, 409)),
    Row(('NOVA', 'POST /servers'), 'POST', '/servers',
        _server(flavor='b-huge', hints={
            'reserved': 'True',
            'lease_params': '{"name": "b-later", "start": "{later}", '
                            '"duration": "1h"}'}),
        (409,)),
    Row(('NOVA', 'POST /servers'), 'POST', '/servers',
        _server(hints={
            'reserved': 'True',
            'lease_params': '{"name": "b-be", "duration": "1h", '
                            '"type": "best_effort"}'}),
        (400, 403), needs='F1'),
    Row(('NOVA', 'GET /servers/{id}'), 'GET', '/servers/{server}', None,
        NOT_FOUND),
    Row(('NOVA', 'GET /servers/{id}'), 'GET', '/servers/{server}/metadata',
        None, NOT_FOUND),
    Row(('NOVA', 'DELETE /servers/{id}'), 'DELETE', '/servers/{server}',
        None, NOT_FOUND),
    # (Nova's own 404 to an action names an id it has no cell for
    # differently from one another project's server has: Nova's answer,
    # not ours; the status is the same.)
    Row(('NOVA', 'POST /servers/{id}/action'), 'POST',
        '/servers/{server}/action', {'os-stop': None}, NOT_FOUND,
        same=False),
    Row(('NOVA', 'GET /servers'), 'GET', '/servers/detail', None, (200,)),
    Row(('NOVA', 'GET /servers'), 'GET', '/servers/detail?all_tenants=1',
        None, (200, 403)),
]


def routes():
    """Every (method, template) of the lease API's router."""
    from nova_lease.api_ext.lease_api import router
    return {(method, template) for template, methods in
            router.ROUTES.items() for method in methods}


def covered():
    return {row.route for row in ROWS if row.route[0] != 'NOVA'}


def pending(need):
    """Why a row or test needing ``need`` is skipped, or None.

    F1/F2 (best-effort creation admin-only, reasons redacted) bring
    ``[nova_lease_api] best_effort_enabled``; the engine's action gate
    brings its journal (``nova_lease.db`` ``action_journal``).
    """
    if need is None:
        return None
    if need in ('F1', 'F2'):
        if not _has_opt('best_effort_enabled'):
            return 'needs F1/F2 (besteffort branch)'
        return None
    if need == 'gate':
        from nova_lease.db import api as db_api
        if not hasattr(db_api, 'action_list'):
            return 'needs the action gate (gate branch)'
        return None
    return 'needs %s' % need


def _has_opt(name):
    from nova_lease import conf
    for _group, opts in conf.list_opts():
        if any(opt.name == name for opt in opts):
            return True
    return False
