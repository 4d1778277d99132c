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
"""Soak: a long seeded random walk on the in-process Nova, audited.

Runs the walk of tests/functional/soak.py (leased and unleased boots, host
registrations and host leases, offers and flexible-window leases,
Blazar's instance reservations and boots with their flavors, reservation
updates and date changes, deletes, early ends, extensions, shelve and
unshelve, cold migrations, the idle-host pass, best-effort leases with
deletes mid-hunt and engine restarts, clock advances and engine runs on
a few small fake hosts) for ``--steps``
steps from ``--seed``, with ``nova-lease-manage audit``'s checks after
every step. It stops at the
first step after which the auditor finds anything (or that fails: a 5xx,
servers that never settle) and prints that step, so that the same seed
replays it. One line per step goes to stderr with ``--verbose``.

The last line printed is one JSON object: ``steps`` (done), ``seed``,
``violations`` (auditor findings at the failing step; 0 when clean),
``failure`` (the failing step, or null), ``evidence`` (what the side
database says of the leases the findings name: their events, claims and
retries; or null), ``seconds`` and ``ops`` (how often each kind of step
ran).

    python benchmarks/soak.py --steps 2000 --seed 7
"""

import argparse
import cProfile
import json
import os
import pstats
import sys
import time

os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', '1')
sys.path.insert(0, os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

import nova.tests.functional  # noqa: E402,F401  (first, as in the tests)

# Imported before Nova's fixtures forbid os.uname() (numpy calls it).
from nova_lease.scheduler import filters  # noqa: E402,F401
from tests.functional import base  # noqa: E402
from tests.functional import soak  # noqa: E402

ARGS = None
RESULT = {}


class SoakBench(soak.SoakCase):

    def test_soak(self):
        def log(line):
            print(line, file=sys.stderr, flush=True)
        walk = soak.Walk(self, ARGS.seed, log=log if ARGS.verbose else None)
        t0 = time.monotonic()
        profile_after = ARGS.profile_after
        if profile_after and profile_after < ARGS.steps:
            steps, findings, failure = walk.run(profile_after)
            if not failure:
                profiler = cProfile.Profile()
                profiler.enable()
                steps, findings, failure = walk.run(
                    ARGS.steps - profile_after)
                profiler.disable()
                pstats.Stats(profiler, stream=sys.stderr).sort_stats(
                    'cumulative').print_stats(60)
        else:
            steps, findings, failure = walk.run(ARGS.steps)
        RESULT.update({
            'steps': steps, 'seed': ARGS.seed,
            'violations': len(findings),
            'failure': failure,
            'findings': [f.to_dict() for f in findings],
            'evidence': walk.evidence,
            'seconds': round(time.monotonic() - t0, 1),
            'ops': dict(sorted(walk.counts.items())),
            'load_average_1min': round(os.getloadavg()[0], 2),
        })


def main(argv=None):
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--steps', type=int, default=200)
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--verbose', action='store_true',
                        help='one line per step on stderr (with the '
                             'seconds of its operation, settling and audit)')
    parser.add_argument('--profile-after', type=int, default=0,
                        metavar='N',
                        help='profile the steps after the first N (the '
                             'thread of the walk) and print the profile '
                             'on stderr')
    ARGS = parser.parse_args(argv)
    if not base.run_case(SoakBench('test_soak')) or not RESULT:
        return 2
    if RESULT['failure']:
        print('first failing step: %s' % RESULT['failure'])
        print('replay: python benchmarks/soak.py --seed %d --steps %d'
              % (RESULT['seed'], RESULT['steps']))
    print(json.dumps(RESULT, sort_keys=True))
    return 1 if RESULT['failure'] else 0


if __name__ == '__main__':
    sys.exit(main())
