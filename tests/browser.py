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
"""Headless Chromium for the tests, with no Python dependency.

:class:`Browser` drives Chromium through chromedriver's W3C WebDriver HTTP
API (JSON over HTTP: urllib is enough): open a page, run JavaScript in it
(the live DOM), take a screenshot. :func:`screenshot` and :func:`dump_dom`
run ``chromium --headless`` once. Chromium and chromedriver come from the
OS packages (tools/install-chromium.sh); :func:`missing` says why they
cannot be used, for a skip.
"""

import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INSTALL = os.path.join(ROOT, 'tools', 'install-chromium.sh')
#: Debian's /usr/bin/chromium is a shell launcher; chromedriver wants the
#: binary itself.
BINARIES = ('/usr/lib/chromium/chromium', 'chromium', 'chromium-browser',
            'google-chrome')
#: Flags for a root user in a container without a display.
FLAGS = ('--headless=new', '--no-sandbox', '--disable-gpu',
         '--disable-dev-shm-usage', '--hide-scrollbars',
         '--no-first-run', '--no-default-browser-check',
         '--force-device-scale-factor=1')


def binary():
    """The Chromium binary, or None."""
    for name in BINARIES:
        path = name if os.path.isabs(name) else shutil.which(name)
        if path and os.access(path, os.X_OK):
            return path
    return None


def driver():
    """chromedriver, or None."""
    return shutil.which('chromedriver')


#: Set (and not "0"): the browser tests skip, and tools/run-tests.sh does
#: not install Chromium.
SKIP_VARIABLE = 'NOVA_LEASE_SKIP_DASHBOARD'


def missing():
    """Why the browser tests cannot run (None: they can)."""
    if os.environ.get(SKIP_VARIABLE, '') not in ('', '0'):
        return ('%s is set: the browser tests (dashboard, capacity page) '
                'are skipped' % SKIP_VARIABLE)
    if binary() is None:
        return ('Chromium is not installed and tools/install-chromium.sh '
                '(run by tools/run-tests.sh) could not install it')
    if driver() is None:
        return ('chromedriver is not installed (the chromium-driver '
                'package; tools/install-chromium.sh installs it)')
    return None


def _run(args, timeout):
    profile = tempfile.mkdtemp(prefix='nova-lease-chromium-')
    try:
        return subprocess.run(
            [binary()] + list(FLAGS) + ['--user-data-dir=' + profile]
            + list(args), stdin=subprocess.DEVNULL, capture_output=True,
            timeout=timeout, check=True)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def screenshot(url, path, width=1400, height=900, timeout=60):
    """``chromium --headless --screenshot``: ``url`` as a PNG at ``path``."""
    _run(['--screenshot=' + path, '--window-size=%d,%d' % (width, height),
          url], timeout)
    with open(path, 'rb') as f:
        return f.read()


def dump_dom(url, timeout=60):
    """``chromium --headless --dump-dom``: the page's DOM, serialized."""
    return _run(['--dump-dom', url], timeout).stdout.decode('utf-8')


def _free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class WebDriverError(Exception):
    pass


class Browser(object):
    """One headless Chromium under chromedriver (a context manager)."""

    def __init__(self, width=1400, height=900, timeout=60):
        self.width, self.height, self.timeout = width, height, timeout
        self.process = None
        self.session = None
        self.profile = None

    def __enter__(self):
        port = _free_port()
        self.base = 'http://127.0.0.1:%d' % port
        self.log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [driver(), '--port=%d' % port], stdin=subprocess.DEVNULL,
            stdout=self.log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + self.timeout
            while True:
                try:
                    if self._call('GET', '/status').get('ready'):
                        break
                except (OSError, WebDriverError):
                    pass
                if self.process.poll() is not None or \
                        time.monotonic() > deadline:
                    raise WebDriverError('chromedriver did not start: %s'
                                         % self._log())
                time.sleep(0.1)
            self.profile = tempfile.mkdtemp(prefix='nova-lease-chromium-')
            size = '--window-size=%d,%d' % (self.width, self.height)
            args = list(FLAGS) + [size, '--user-data-dir=' + self.profile]
            value = self._call('POST', '/session', {'capabilities': {
                'alwaysMatch': {'browserName': 'chrome',
                                'goog:chromeOptions': {
                                    'binary': binary(), 'args': args}}}})
            self.session = value['sessionId']
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        if self.session:
            try:
                self._call('DELETE', '/session/%s' % self.session)
            except (OSError, WebDriverError):
                pass
            self.session = None
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None
            self.log.close()
        if self.profile:
            shutil.rmtree(self.profile, ignore_errors=True)
            self.profile = None

    def _log(self):
        self.log.seek(0)
        return self.log.read().decode('utf-8', 'replace')[-2000:]

    def _call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode('utf-8')
        request = urllib.request.Request(
            self.base + path, data=data, method=method,
            headers={'Content-Type': 'application/json'})
        try:
            with urllib.request.urlopen(request,
                                        timeout=self.timeout) as resp:
                reply = json.loads(resp.read().decode('utf-8'))
        except urllib.error.HTTPError as e:
            raise WebDriverError('%s %s: %s %s' % (
                method, path, e.code, e.read().decode('utf-8', 'replace')))
        return reply.get('value', reply) if isinstance(reply, dict) else reply

    def _session(self, method, path, body=None):
        return self._call(method, '/session/%s%s' % (self.session, path),
                          body)

    def open(self, url):
        self._session('POST', '/url', {'url': url})

    def script(self, source, *args):
        """Run ``source`` (a function body) in the page; its result."""
        return self._session('POST', '/execute/sync',
                             {'script': source, 'args': list(args)})

    def screenshot(self):
        """The viewport as PNG bytes."""
        return base64.b64decode(self._session('GET', '/screenshot'))


def png_pixels(data):
    """(width, height, rows of RGB(A) tuples) of an 8-bit RGB/RGBA PNG."""
    if data[:8] != b'\x89PNG\r\n\x1a\n':
        raise ValueError('not a PNG')
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack('>I4s', data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b'IHDR':
            header = struct.unpack('>IIBBBBB', chunk)
        elif kind == b'IDAT':
            idat.append(chunk)
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    channels = {2: 3, 6: 4}.get(colour)
    if depth != 8 or channels is None or interlace:
        raise ValueError('unsupported PNG (depth %d, colour type %d, '
                         'interlace %d)' % (depth, colour, interlace))
    raw = zlib.decompress(b''.join(idat))
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xff
            elif kind == 2:
                line[i] = (line[i] + up) & 0xff
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xff
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                pred = left if pa <= pb and pa <= pc else (
                    up if pb <= pc else corner)
                line[i] = (line[i] + pred) & 0xff
        rows.append([tuple(line[i:i + 3])
                     for i in range(0, stride, channels)])
        previous = line
    return width, height, rows
