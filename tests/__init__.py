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
"""nova_lease tests run in Nova 34's native threading mode.

stestr runs unit and functional tests in the same worker processes, so the
concurrency mode is chosen here, before any test module is imported: Nova's
functional fixtures read OS_NOVA_DISABLE_EVENTLET_PATCHING, and importing
nova_lease.cmd refuses eventlet and selects oslo.service's threading
backend (so an early oslo.messaging import cannot pick eventlet).
"""

import os

os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', '1')

import nova_lease.cmd  # noqa: E402,F401,I202
