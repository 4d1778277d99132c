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
"""The read-only mappings a snapshot of the lease calendar is made of.

:class:`Layered` shares a big base dict between the snapshots patched
from one full read and holds each one's changes in a small overlay;
:class:`ValueView` makes the values a caller sees (calendar Items,
Reservations) from the raw tuples the snapshot keeps (see
:mod:`nova_lease.scheduler.snapshot`). Neither knows the snapshot.
"""

import collections.abc
import itertools


_MISSING = object()
#: The value of a key removed, in the changes given to
#: :meth:`Layered.patched`.
GONE = object()


class Layered(collections.abc.Mapping):
    """A read-only mapping: a shared base dict under a small overlay.

    A snapshot patched after a change shares its predecessor's big dicts
    (100,000 reservations) and holds only what changed; the overlay is
    merged into a new base when it grows past :data:`COMPACT_SIZE` or an
    eighth of the base.
    """

    __slots__ = ('_base', '_top', '_len')

    def __init__(self, base=None, top=None, length=None):
        self._base = base if base is not None else {}
        self._top = top or {}
        if length is None:
            length = len(self._base) + sum(
                (v is not GONE) - (k in self._base)
                for k, v in self._top.items())
        self._len = length

    def get(self, key, default=None):
        value = self._top.get(key, _MISSING)
        if value is _MISSING:
            return self._base.get(key, default)
        return default if value is GONE else value

    def __getitem__(self, key):
        value = self.get(key, _MISSING)
        if value is _MISSING:
            raise KeyError(key)
        return value

    def __contains__(self, key):
        return self.get(key, _MISSING) is not _MISSING

    def __iter__(self):
        top = self._top
        for key in self._base:
            if key not in top:
                yield key
        for key, value in top.items():
            if value is not GONE:
                yield key

    def __len__(self):
        return self._len

    def fast_items(self):
        """Iterate (key, value) pairs (the base's at C speed)."""
        top = self._top
        if not top:
            return iter(self._base.items())
        return itertools.chain(
            ((k, v) for k, v in self._base.items() if k not in top),
            ((k, v) for k, v in top.items() if v is not GONE))

    def __repr__(self):
        return 'Layered(%r)' % dict(self)

    def patched(self, changes):
        """A new Layered with ``changes`` {key: value or GONE} applied."""
        if not changes:
            return self
        top = dict(self._top)
        length = self._len
        for key, value in changes.items():
            was = key in self
            top[key] = value
            length += (value is not GONE) - was
        if len(top) > max(COMPACT_SIZE, len(self._base) // 8):
            base = dict(self._base)
            for key, value in top.items():
                if value is GONE:
                    base.pop(key, None)
                else:
                    base[key] = value
            return Layered(base, None, length)
        return Layered(self._base, top, length)


#: Overlay size past which a Layered is merged into a new base dict.
COMPACT_SIZE = 4096


class ValueView(collections.abc.Mapping):
    """A read-only mapping whose values are made from raw ones."""

    __slots__ = ('_raw', '_make')

    def __init__(self, raw, make):
        self._raw = raw
        self._make = make

    def get(self, key, default=None):
        value = self._raw.get(key, _MISSING)
        return default if value is _MISSING else self._make(value)

    def __getitem__(self, key):
        return self._make(self._raw[key])

    def __contains__(self, key):
        return key in self._raw

    def __iter__(self):
        return iter(self._raw)

    def __len__(self):
        return len(self._raw)

    def keys(self):
        # A dict's own view when the raw mapping is a dict: set
        # operations on it run at C speed (LeaseFilter's host pass).
        return self._raw.keys()

    def __repr__(self):
        return '%s(%r)' % (type(self).__name__, dict(self))
