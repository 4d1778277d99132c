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
"""The fault drill's relay: relays both ways, takes the service away
(open connections reset, new ones refused) and gives it back, on real
loopback sockets.
"""

import os
import socket
import socketserver
import threading
import time

import testtools

from nova_lease.sandbox import proxy


class _Echo(socketserver.BaseRequestHandler):

    def handle(self):
        while True:
            try:
                data = self.request.recv(65536)
            except OSError:
                return
            if not data:
                return
            self.request.sendall(data)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def _exchange(port, payload):
    with socket.create_connection((proxy.LOOPBACK, port), timeout=10) as s:
        reader_out = []

        def _read():
            got = b''
            while len(got) < len(payload):
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += chunk
            reader_out.append(got)

        reader = threading.Thread(target=_read)
        reader.start()
        s.sendall(payload)
        reader.join(10)
        return reader_out[0] if reader_out else b''


def _talk(conn, times=1):
    """Send and read back; OSError (a reset, or closed: ConnectionError
    is an OSError) when the relay takes the service away.
    """
    for _ in range(times):
        conn.sendall(b'ping')
        if not conn.recv(4):
            raise ConnectionResetError('closed')


def _refused(port):
    """Does a new connection get nothing through (reset at connect or
    at the first exchange)?
    """
    try:
        with socket.create_connection((proxy.LOOPBACK, port),
                                      timeout=5) as conn:
            _talk(conn)
    except OSError:
        return True
    return False


class RelayTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.server = _Server((proxy.LOOPBACK, 0), _Echo)
        threading.Thread(target=self.server.serve_forever,
                         daemon=True).start()
        self.addCleanup(self.server.server_close)
        self.addCleanup(self.server.shutdown)
        self.relay = proxy.Relay(self.server.server_address[1]).start()
        self.addCleanup(self.relay.stop)

    def test_relays_both_ways_with_back_pressure(self):
        # 8 MB both ways: more than the sockets' buffers, so that sends
        # are partial and the relay has to hold data back.
        payload = os.urandom(8 * 1024 * 1024)
        self.assertEqual(payload, _exchange(self.relay.port, payload))
        self.assertEqual(1, self.relay.accepted)

    def test_cut_resets_open_connections_and_refuses_new_ones(self):
        conn = socket.create_connection((proxy.LOOPBACK, self.relay.port),
                                        timeout=5)
        self.addCleanup(conn.close)
        conn.sendall(b'ping')
        self.assertEqual(b'ping', conn.recv(4))
        self.relay.cut()
        # The open connection is reset ...
        self.assertRaises(OSError, _talk, conn, 50)
        self.assertEqual(1, self.relay.reset)
        # ... and a new one gets nothing through.
        self.assertTrue(_refused(self.relay.port))
        self.assertGreaterEqual(self.relay.refused, 1)
        self.relay.restore()
        self.assertEqual(b'back', _exchange(self.relay.port, b'back'))
        # Closed by the client: the relay closes its side too.
        for _ in range(100):
            if not self.relay.open_connections():
                break
            time.sleep(0.05)
        self.assertEqual(0, self.relay.open_connections())

    def test_server_down_is_a_refusal(self):
        self.server.shutdown()
        self.server.server_close()
        self.assertTrue(_refused(self.relay.port))
        self.assertEqual(1, self.relay.refused)

    def test_only_loopback(self):
        self.assertRaises(ValueError, proxy.Relay, 5672,
                          target_host='10.0.0.1')
