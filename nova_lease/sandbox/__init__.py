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
"""The sandbox: a real Keystone and an all-in-one Nova 34 on 127.0.0.1.

``nova-lease-sandbox`` (nova_lease.cmd.sandbox) is the console script; this
package holds its parts:

* :mod:`.keystone` sets up and runs Keystone as a child process
  (:mod:`.keystone_server` is what that child runs);
* :mod:`.nova_aio` runs nova-api (real keystonemiddleware, Nova's paste
  pipeline plus the nova_lease filter), conductor, scheduler, placement and
  fake-driver computes in this process, in native threading mode;
* :mod:`.engine` runs nova-lease-engine as a child process (the installed
  console script on a configuration file of its own), restarts it when it
  dies and stops it at the end;
* :mod:`.children` stops those child processes;
* :mod:`.openrc` writes the openrc files;
* :mod:`.demo` is the scripted scenario of ``--demo``;
* :mod:`.runner` ties them together.

``--split`` runs Nova as separate processes instead (:mod:`.split`: real
Placement, nova-api under gunicorn, scheduler, conductors, two cells, two
engines, on MariaDB and RabbitMQ), configured from the install guide's
ini blocks (:mod:`.guide`), with Glance and Neutron stand-ins
(:mod:`.standins`).
"""
