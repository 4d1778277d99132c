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
"""A TCP relay that can take a service away and give it back.

The fault drill (benchmarks/faults.py) stops RabbitMQ and MariaDB for a
while without touching the machine's servers, which other programs use:
the split sandbox's processes reach them through a :class:`Relay` on
127.0.0.1, and :meth:`Relay.cut` is what they see when the server stops
(every open connection reset, every new one refused) until
:meth:`Relay.restore`. One thread relays every connection (``selectors``),
so a relay costs one thread whatever the number of clients.

Only loopback targets are accepted: the drill never reaches outside
127.0.0.1.
"""

import errno
import selectors
import socket
import struct
import threading

LOOPBACK = '127.0.0.1'
_CHUNK = 65536


class Relay(object):
    """Relays ``127.0.0.1:port`` (0: any free port; see :attr:`port`) to
    ``127.0.0.1:target_port``. :meth:`start` before use, :meth:`stop`
    after.
    """

    def __init__(self, target_port, port=0, target_host=LOOPBACK):
        if target_host != LOOPBACK:
            raise ValueError('a relay only reaches %s, not %r'
                             % (LOOPBACK, target_host))
        self.target = (target_host, target_port)
        self._listen_port = port
        self._selector = selectors.DefaultSelector()
        self._lock = threading.Lock()
        self._pairs = {}          # socket -> its peer
        self._pending = {}        # socket -> bytes not yet sent to it
        self._listener = None
        self._thread = None
        self._stopping = False
        self._cut = False
        self._wake_r, self._wake_w = socket.socketpair()
        #: Connections relayed, and reset or refused by cuts (counters).
        self.accepted = 0
        self.reset = 0
        self.refused = 0

    @property
    def port(self):
        return self._listener.getsockname()[1]

    @property
    def is_cut(self):
        return self._cut

    def start(self):
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((LOOPBACK, self._listen_port))
        self._listener.listen(128)
        self._listener.setblocking(False)
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._thread = threading.Thread(
            target=self._run, name='relay-%d' % self.port, daemon=True)
        self._thread.start()
        return self

    def cut(self):
        """From now on until :meth:`restore`: reset every relayed
        connection and refuse (reset at once) every new one, as a stopped
        server's host does.
        """
        with self._lock:
            self._cut = True
        self._wake()

    def restore(self):
        with self._lock:
            self._cut = False
        self._wake()

    def stop(self):
        self._stopping = True
        self._wake()
        if self._thread is not None:
            self._thread.join(5)
        for sock in list(self._pairs):
            _close(sock, reset=False)
        self._pairs.clear()
        for sock in (self._listener, self._wake_r, self._wake_w):
            if sock is not None:
                sock.close()
        self._selector.close()

    def open_connections(self):
        with self._lock:
            return len(self._pairs) // 2

    # -- the relay thread ------------------------------------------------

    def _wake(self):
        try:
            self._wake_w.send(b'x')
        except OSError:
            pass

    def _run(self):
        while not self._stopping:
            for key, mask in self._selector.select(1.0):
                sock = key.fileobj
                if sock is self._wake_r:
                    try:
                        sock.recv(_CHUNK)
                    except OSError:
                        pass
                elif sock is self._listener:
                    self._accept()
                else:
                    if mask & selectors.EVENT_WRITE:
                        self._flush(sock)
                    if mask & selectors.EVENT_READ and sock in self._pairs:
                        self._relay(sock)
            if self._cut:
                self._reset_all()

    def _accept(self):
        while True:
            try:
                client, _addr = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            upstream = None
            if not self._cut:
                try:
                    # Loopback: connected or refused at once.
                    upstream = socket.create_connection(self.target,
                                                        timeout=5)
                except OSError:
                    pass
            if upstream is None:
                # Cut, or the real server is down: so is the relay.
                self.refused += 1
                _close(client, reset=True)
                continue
            for sock in (client, upstream):
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._pairs[client] = upstream
                self._pairs[upstream] = client
            self._selector.register(client, selectors.EVENT_READ)
            self._selector.register(upstream, selectors.EVENT_READ)
            self.accepted += 1

    def _relay(self, sock):
        peer = self._pairs[sock]
        try:
            data = sock.recv(_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b''
        if not data:
            self._drop(sock, reset=False)
            return
        self._send(peer, data)

    def _send(self, sock, data):
        try:
            sent = sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self._drop(sock, reset=True)
            return
        if sent < len(data):
            # Back-pressure: read nothing more from its peer until ``sock``
            # has taken this.
            self._pending[sock] = data[sent:]
            self._interest(sock)
            self._interest(self._pairs[sock])

    def _flush(self, sock):
        data = self._pending.pop(sock, b'')
        if sock not in self._pairs:
            return
        self._interest(sock)
        self._interest(self._pairs[sock])
        if data:
            self._send(sock, data)

    def _interest(self, sock):
        """Read a socket unless its peer has data pending; write to it
        while it has.
        """
        events = 0
        if not self._pending.get(self._pairs[sock]):
            events |= selectors.EVENT_READ
        if self._pending.get(sock):
            events |= selectors.EVENT_WRITE
        registered = sock in self._selector.get_map()
        if events and registered:
            self._selector.modify(sock, events)
        elif events:
            self._selector.register(sock, events)
        elif registered:
            self._selector.unregister(sock)

    def _drop(self, sock, reset):
        with self._lock:
            peer = self._pairs.pop(sock, None)
            if peer is not None:
                self._pairs.pop(peer, None)
        for s in (sock, peer):
            if s is None:
                continue
            self._pending.pop(s, None)
            try:
                self._selector.unregister(s)
            except (KeyError, ValueError):
                pass
            _close(s, reset=reset)

    def _reset_all(self):
        with self._lock:
            socks = list(self._pairs)
        for sock in socks:
            if sock in self._pairs:
                # Counted first: a client may look as soon as it is reset.
                self.reset += 1
                self._drop(sock, reset=True)


def _close(sock, reset):
    """Close ``sock``; with ``reset``, with a RST (SO_LINGER 0) as a
    host whose server died answers, not a FIN.
    """
    try:
        if reset:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                            struct.pack('ii', 1, 0))
        sock.close()
    except OSError as e:
        if e.errno not in (errno.EBADF, errno.ENOTCONN):
            raise
