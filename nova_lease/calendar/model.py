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

"""The calendar's values: capacities, demands, items and usages."""

import collections
import math


def usable_capacity(total, reserved=0, allocation_ratio=1.0):
    """Usable amount of one resource, the way placement computes it.

    placement: ``capacity = (total - reserved) * allocation_ratio`` and an
    allocation fits when ``used + amount <= capacity``. With integer amounts
    that is ``used + amount <= floor(capacity)``.
    """
    return int(math.floor((total - reserved) * allocation_ratio))


class HostCapacity(collections.namedtuple('HostCapacity',
                                          'vcpus memory_mb disk_gb')):
    """Usable capacity of a host (already allocation-ratio'd and reserved)."""

    __slots__ = ()

    @classmethod
    def from_inventory(cls, vcpus, memory_mb, disk_gb,
                       cpu_allocation_ratio=1.0, ram_allocation_ratio=1.0,
                       disk_allocation_ratio=1.0, reserved_vcpus=0,
                       reserved_memory_mb=0, reserved_disk_gb=0):
        """Capacity from totals, allocation ratios and reserved amounts.

        Same formula as placement's inventory capacity, per resource:
        ``floor((total - reserved) * allocation_ratio)``. Use the values of
        the host's placement inventory (VCPU, MEMORY_MB, DISK_GB); note that
        Nova reports ``reserved_host_disk_mb`` to placement as DISK_GB
        rounded up.
        """
        return cls(
            usable_capacity(vcpus, reserved_vcpus, cpu_allocation_ratio),
            usable_capacity(memory_mb, reserved_memory_mb,
                            ram_allocation_ratio),
            usable_capacity(disk_gb, reserved_disk_gb, disk_allocation_ratio))


class Demand(collections.namedtuple('Demand',
                                    'vcpus memory_mb disk_gb whole_host')):
    """What a request needs: resources, or the whole host."""

    __slots__ = ()

    def __new__(cls, vcpus=0, memory_mb=0, disk_gb=0, whole_host=False):
        return super().__new__(cls, vcpus, memory_mb, disk_gb,
                               bool(whole_host))

    @classmethod
    def whole(cls):
        return cls(whole_host=True)


class Item(collections.namedtuple(
        'Item',
        'host start end vcpus memory_mb disk_gb whole_host ref')):
    """One demand in the calendar: ``host`` is held over ``[start, end)``.

    ``start`` and ``end`` are naive UTC datetimes, or integer
    microseconds since the epoch (:func:`to_us`; what the side database's
    window reads give): a calendar computes in those, and items that all
    come so skip a conversion (mixed, they are converted one by one).
    ``end=None`` means forever (a VM without a lease). ``whole_host=True``
    takes the whole host (its resource fields are ignored). ``ref`` is an
    opaque label (e.g. a reservation or instance id) kept with the item; it
    takes part in equality, which :meth:`Calendar.with_changes` uses.
    """

    __slots__ = ()

    def __new__(cls, host, start, end=None, vcpus=0, memory_mb=0, disk_gb=0,
                whole_host=False, ref=None):
        return super().__new__(cls, host, start, end, vcpus, memory_mb,
                               disk_gb, bool(whole_host), ref)

    @classmethod
    def for_demand(cls, host, demand, start, end=None, ref=None):
        return cls(host, start, end, demand.vcpus, demand.memory_mb,
                   demand.disk_gb, demand.whole_host, ref)


class Usage(collections.namedtuple('Usage',
                                   'vcpus memory_mb disk_gb whole_host')):
    """Summed demand on a host (at an instant, or a per-resource peak)."""

    __slots__ = ()
