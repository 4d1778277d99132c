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
"""Console scripts of nova_lease.

Importing this package puts the process in native-threading mode, the way
Nova 34's own commands do (nova/monkey_patch.py): it refuses any later
import of eventlet and selects oslo.service's threading backend. Both must
happen before oslo.messaging is imported: oslo.messaging imports
oslo.service, which would otherwise load its eventlet backend, and futurist
imports eventlet whenever it is installed and importable.
"""

import sys

from oslo_service import backend as _service_backend


class _RefuseEventlet(object):
    """A meta path finder that makes import eventlet fail."""

    def find_spec(self, fullname, path, target=None):
        if fullname == 'eventlet' or fullname.startswith('eventlet.'):
            raise ImportError('nova_lease runs in native threading mode and '
                              'must not import eventlet')
        return None


def _threading_mode():
    if 'eventlet' in sys.modules:
        raise RuntimeError('eventlet was imported before nova_lease.cmd; '
                           'nova_lease runs in native threading mode only')
    if not any(isinstance(f, _RefuseEventlet) for f in sys.meta_path):
        sys.meta_path.insert(0, _RefuseEventlet())
    if _service_backend.get_backend_type() is None:
        _service_backend.init_backend(_service_backend.BackendType.THREADING)


_threading_mode()
