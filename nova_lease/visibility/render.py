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
"""The capacity picture: a timeline of hosts and leases (pure, no I/O).

:func:`svg` draws the body of ``GET /v2.1/os-reservation/capacity`` (with
``detail=hosts``; the ``capacity`` object or the whole body) as a
standalone SVG document: one row per host, time from left to right, each
lease's booking a bar labelled with the lease's name and project (its
colour derived from the lease id, so the same lease has the same colour in
every picture), the free fraction of the host shaded per step (the darker
the green, the more is free), idle registered hosts hatched until when
they stay idle, "now" a red vertical line, a time axis and a legend.
Without ``host_details`` (a project member's view) it draws one row of the
cloud's aggregate free capacity.

:func:`html` wraps it into a self-contained page (inline CSS and SVG, no
script, nothing fetched): a title, the window, a table of the totals, the
picture and a table of the bookings.

Every text that comes from the body (lease names are user input) is
escaped; elements carry ``class`` and ``data-*`` attributes (``booking``,
``data-lease-id``, ``host-row``, ``data-host``, ...) for tests and for
whoever styles the page.
"""

import datetime
import hashlib
import html as html_lib
import re

#: The resources of a host whose free fraction is shaded (the smallest of
#: their free fractions is the host's).
HOST_RESOURCES = ('vcpus', 'memory_mb', 'disk_gb')

#: Tick spacings the time axis chooses from (seconds).
TICK_STEPS = (60, 300, 600, 900, 1800, 3600, 2 * 3600, 3 * 3600, 6 * 3600,
              12 * 3600, 86400, 2 * 86400, 7 * 86400, 14 * 86400,
              28 * 86400)

WIDTH = 1400
LABEL_WIDTH = 220
RIGHT_MARGIN = 20
TOP = 60
#: A host row is at least this high (its three lines of label).
MIN_ROW_HEIGHT = 52
LANE_HEIGHT = 24
ROW_PADDING = 5
MIN_TICK_PX = 90
FONT = 'DejaVu Sans, Verdana, Arial, sans-serif'

_CONTROL = re.compile('[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]')

_STYLE = """
.axis text, .host-label text, .legend text {font-size: 12px; fill: #222}
.host-label .host-name {font-weight: bold; font-size: 13px}
.host-label .host-info {fill: #555; font-size: 11px}
.host-label .idle-badge {fill: #7a4f00; font-size: 11px; font-weight: bold}
.booking text {font-size: 12px; fill: #111}
.grid {stroke: #d8d8d8; stroke-width: 1}
.row-line {stroke: #999; stroke-width: 1}
.now line {stroke: #d00; stroke-width: 2}
.now text {fill: #d00; font-size: 12px; font-weight: bold}
.empty {fill: #666; font-size: 13px; font-style: italic}
"""


def _clean(text):
    """Text from the body as a str XML 1.0 accepts (control chars to ?)."""
    return _CONTROL.sub('?', '' if text is None else str(text))


def esc(text):
    """Escape text for an XML/HTML text node or a quoted attribute."""
    return html_lib.escape(_clean(text), quote=True)


def parse_time(value):
    """An ISO 8601 date of the body as an aware UTC datetime."""
    if isinstance(value, datetime.datetime):
        when = value
    else:
        when = datetime.datetime.fromisoformat(str(value).replace('Z',
                                                                  '+00:00'))
    if when.tzinfo is None:
        return when.replace(tzinfo=datetime.timezone.utc)
    return when.astimezone(datetime.timezone.utc)


#: The colours of leases: 12 hues 30 degrees apart, each light and less
#: light (dark text stays readable on all of them).
PALETTE = tuple('hsl(%d, %d%%, %d%%)' % (hue, sat, light)
                for light, sat in ((72, 70), (82, 60))
                for hue in range(0, 360, 30))


def _slot(lease_id):
    digest = hashlib.sha256(_clean(lease_id).encode('utf-8')).digest()
    return int.from_bytes(digest[:4], 'big') % len(PALETTE)


def lease_colour(lease_id):
    """A lease's own colour, derived from its id."""
    return PALETTE[_slot(lease_id)]


def lease_colours(lease_ids):
    """The colour of each lease of a picture: ``{lease_id: colour}``.

    Each lease gets its own colour (:func:`lease_colour`) unless another
    lease of the picture has it: then, in the order of the ids, the next
    colour no lease of the picture has (while there is one). The same
    leases always get the same colours.
    """
    taken = {}
    out = {}
    for lease_id in sorted(set(_clean(i) for i in lease_ids)):
        slot = _slot(lease_id)
        if len(taken) < len(PALETTE):
            while slot in taken:
                slot = (slot + 1) % len(PALETTE)
        taken[slot] = lease_id
        out[lease_id] = PALETTE[slot]
    return out


def _number(value):
    if isinstance(value, float) and not value.is_integer():
        return '{:,.1f}'.format(value)
    try:
        return '{:,}'.format(int(value))
    except (TypeError, ValueError):
        return _clean(value)


def _short(project_id):
    project_id = _clean(project_id)
    return project_id[:8] if len(project_id) > 12 else project_id


def _fmt(when, with_date=True):
    return when.strftime('%Y-%m-%d %H:%M' if with_date else '%H:%M')


def _body(capacity):
    if isinstance(capacity, dict) and 'capacity' in capacity and \
            isinstance(capacity['capacity'], dict):
        return capacity['capacity']
    return capacity


def free_fraction(capacity, free):
    """The free fraction of a host: the smallest over its resources."""
    fractions = []
    for resource in HOST_RESOURCES:
        total = (capacity or {}).get(resource) or 0
        if total > 0:
            left = (free or {}).get(resource, 0) or 0
            fractions.append(max(0.0, min(1.0, left / total)))
    return min(fractions) if fractions else 0.0


def free_runs(values):
    """``[(first, last)]`` indexes of the runs of equal values."""
    runs = []
    for number, value in enumerate(values):
        if runs and values[runs[-1][1]] == value:
            runs[-1][1] = number
        else:
            runs.append([number, number])
    return [tuple(r) for r in runs]


def lanes(bookings):
    """Place bookings in lanes so that no two in a lane overlap.

    ``bookings`` are ``(start, end, item)`` tuples; returns ``[(lane,
    item)]`` in the order of ``bookings`` sorted by start, and the number
    of lanes (at least 1).
    """
    ends = []
    placed = []
    for start, end, item in sorted(bookings, key=lambda b: (b[0], b[1])):
        for lane, free_from in enumerate(ends):
            if free_from <= start:
                ends[lane] = end
                break
        else:
            lane = len(ends)
            ends.append(end)
        placed.append((lane, item))
    return placed, max(1, len(ends))


def ticks(start, end, plot_width):
    """The axis ticks: datetimes on a round spacing, about MIN_TICK_PX apart.

    Returns ``(spacing_seconds, [datetime])``.
    """
    span = max(1.0, (end - start).total_seconds())
    spacing = TICK_STEPS[-1]
    for candidate in TICK_STEPS:
        if candidate / span * plot_width >= MIN_TICK_PX:
            spacing = candidate
            break
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    first = int((start - epoch).total_seconds())
    first = -(-first // spacing) * spacing
    if spacing >= 7 * 86400:
        # Weeks and more: on midnights.
        first = -(-first // 86400) * 86400
    out = []
    when = epoch + datetime.timedelta(seconds=first)
    while when <= end:
        out.append(when)
        when += datetime.timedelta(seconds=spacing)
    return spacing, out


def _anchor(x, plot_x, plot_w):
    """A tick label's text-anchor: kept inside the plot at its edges."""
    if x > plot_x + plot_w - 45:
        return 'end'
    if x < plot_x + 45:
        return 'start'
    return 'middle'


class _Scale(object):
    def __init__(self, start, end, x0, width):
        self.start, self.end, self.x0, self.width = start, end, x0, width
        self.span = max(1.0, (end - start).total_seconds())

    def x(self, when):
        when = min(max(when, self.start), self.end)
        return self.x0 + (when - self.start).total_seconds() / self.span * \
            self.width


#: A booking without an end (none should have one) lasts this long.
FOREVER = datetime.datetime(9999, 1, 1, tzinfo=datetime.timezone.utc)


def _booking_end(booking):
    return parse_time(booking['end']) if booking.get('end') else FOREVER


def _fmt_end(booking):
    return _fmt(parse_time(booking['end'])) if booking.get('end') else '-'


def _lease_key(booking):
    """What a booking's colour is derived from: its lease."""
    return (booking.get('lease_id') or booking.get('lease_name') or
            booking.get('reservation_id') or '')


def _overlaps(booking, start, end):
    return (parse_time(booking['start']) < end and
            _booking_end(booking) > start)


def _rows(body):
    """The picture's rows: one per host, or one for the whole cloud.

    A host's bookings are those that overlap the window.
    """
    start, end = parse_time(body['start']), parse_time(body['end'])
    details = body.get('host_details')
    steps = body.get('steps') or []
    if details is None:
        hosts = body.get('hosts')
        free = []
        for step in steps:
            caps = {r: (step.get(r) or {}).get('capacity', 0)
                    for r in HOST_RESOURCES}
            frees = {r: (step.get(r) or {}).get('free', 0)
                     for r in HOST_RESOURCES}
            free.append(free_fraction(caps, frees))
        return [{'host': 'all hosts', 'aggregate': True,
                 'info': '%s hosts, aggregate' % _number(hosts or 0),
                 'sizes': '',
                 'free': free, 'bookings': [], 'idle_until': None,
                 'step_free': [{r: (s.get(r) or {}).get('free')
                                for r in HOST_RESOURCES} for s in steps]}]
    rows = []
    for detail in details:
        cap = detail.get('capacity') or {}
        host_steps = detail.get('steps') or []
        sizes = []
        if cap.get('vcpus') is not None:
            sizes.append('%s vCPU' % _number(cap['vcpus']))
        if cap.get('memory_mb') is not None:
            sizes.append('%s GB' % _number(round(cap['memory_mb'] / 1024, 1)))
        if cap.get('disk_gb') is not None:
            sizes.append('%s GB disk' % _number(cap['disk_gb']))
        kind = ('registered (host leases)' if detail.get('registered')
                else 'servers and VM leases')
        if detail.get('availability_zone'):
            kind += ', %s' % _clean(detail['availability_zone'])
        rows.append({
            'host': detail.get('host') or '?',
            'aggregate': False,
            'registered': bool(detail.get('registered')),
            'info': kind,
            'sizes': ' \u00b7 '.join(sizes),
            'zone': detail.get('availability_zone'),
            'free': [free_fraction(cap, s.get('free')) for s in host_steps],
            'step_free': [s.get('free') or {} for s in host_steps],
            'bookings': [b for b in detail.get('bookings') or []
                         if _overlaps(b, start, end)],
            'idle_until': detail.get('idle_until'),
        })
    return rows


def _legend_leases(rows):
    seen = {}
    for row in rows:
        for booking in row['bookings']:
            key = _lease_key(booking)
            if key not in seen:
                seen[key] = booking
    return sorted(seen.values(), key=lambda b: (
        _clean(b.get('lease_name')), _clean(b.get('lease_id'))))


def _booking_label(booking):
    return '%s (%s)' % (_clean(booking.get('lease_name') or
                               booking.get('lease_id') or
                               booking.get('reservation_id') or '?'),
                        _short(booking.get('project_id') or '-'))


def _booking_title(booking, host):
    parts = ['lease %s (%s)' % (_clean(booking.get('lease_name')),
                                _clean(booking.get('lease_id'))),
             'project %s' % _clean(booking.get('project_id')),
             'host %s' % _clean(host),
             '%s' % _clean(booking.get('resource_type')),
             '%s to %s UTC' % (_fmt(parse_time(booking['start'])),
                               _fmt_end(booking))]
    if booking.get('whole_host'):
        parts.append('whole host')
    sizes = ['%s %s' % (_number(booking[k]), k) for k in HOST_RESOURCES
             if booking.get(k) is not None]
    if sizes:
        parts.append(', '.join(sizes))
    return '\n'.join(parts)


def svg(capacity, width=WIDTH):
    """The capacity body drawn as a standalone SVG document (a str)."""
    body = _body(capacity)
    start = parse_time(body['start'])
    end = parse_time(body['end'])
    now = parse_time(body['now']) if body.get('now') else None
    steps = body.get('steps') or []
    rows = _rows(body)
    colours = lease_colours(
        _lease_key(b)
        for row in rows for b in row['bookings'])
    plot_x = LABEL_WIDTH
    plot_w = max(100, width - LABEL_WIDTH - RIGHT_MARGIN)
    scale = _Scale(start, end, plot_x, plot_w)
    step_x = []
    for step in steps:
        s0, s1 = parse_time(step['start']), parse_time(step['end'])
        step_x.append((scale.x(s0), scale.x(s1), s0, s1))
    spacing, tick_times = ticks(start, end, plot_w)

    out = []
    clip_defs = []
    y = TOP
    row_parts = []
    for index, row in enumerate(rows):
        entries = []
        for booking in row['bookings']:
            entries.append((parse_time(booking['start']),
                            _booking_end(booking), booking))
        placed, count = lanes(entries)
        height = max(MIN_ROW_HEIGHT, count * LANE_HEIGHT + 2 * ROW_PADDING)
        part = ['<g class="host-row" data-host="%s" data-row="%d">'
                % (esc(row['host']), index)]
        # Free capacity per step: the more free, the greener; a run of
        # steps with the same free amounts is one rectangle.
        for first, last in free_runs(list(zip(
                row['free'], row['step_free']))[:len(step_x)]):
            fraction = row['free'][first]
            free = row['step_free'][first] or {}
            tip = 'free %d%% from %s to %s UTC: %s' % (
                round(fraction * 100), _fmt(step_x[first][2]),
                _fmt(step_x[last][3]),
                ', '.join('%s %s' % (_number(free[k]), k)
                          for k in HOST_RESOURCES if free.get(k) is not None))
            part.append(
                '<rect class="free" data-free="%.3f" data-steps="%d" '
                'x="%.1f" y="%.1f" width="%.1f" height="%.1f" '
                'fill="#2e9e44" fill-opacity="%.3f"><title>%s</title></rect>'
                % (fraction, last - first + 1, step_x[first][0], y,
                   max(0.0, step_x[last][1] - step_x[first][0]), height,
                   0.06 + 0.34 * fraction, esc(tip)))
        if row['idle_until']:
            idle_end = parse_time(row['idle_until'])
            x1 = scale.x(idle_end)
            part.append(
                '<rect class="idle" data-idle-until="%s" x="%.1f" y="%.1f" '
                'width="%.1f" height="%.1f" fill="url(#idle-hatch)">'
                '<title>idle until %s UTC</title></rect>'
                % (esc(row['idle_until']), plot_x, y,
                   max(0.0, x1 - plot_x), height, esc(_fmt(idle_end))))
        for lane, booking in placed:
            b_start = parse_time(booking['start'])
            b_end = _booking_end(booking)
            x0, x1 = scale.x(b_start), scale.x(b_end)
            bar_w = max(2.0, x1 - x0)
            by = y + ROW_PADDING + lane * LANE_HEIGHT + 1
            bh = LANE_HEIGHT - 2
            lease_key = _lease_key(booking)
            clip = 'clip-%d' % (len(clip_defs) + 1)
            clip_defs.append(
                '<clipPath id="%s"><rect x="%.1f" y="%.1f" width="%.1f" '
                'height="%.1f"/></clipPath>' % (clip, x0, by, bar_w, bh))
            part.append(
                '<g class="booking" data-lease-id="%s" data-lease-name="%s" '
                'data-project-id="%s" data-reservation-id="%s" '
                'data-host="%s" data-resource-type="%s">'
                '<title>%s</title>'
                '<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" rx="3" '
                'fill="%s" stroke="#333" stroke-width="0.8"/>'
                '<text x="%.1f" y="%.1f" clip-path="url(#%s)">%s</text></g>'
                % (esc(booking.get('lease_id')),
                   esc(booking.get('lease_name')),
                   esc(booking.get('project_id')),
                   esc(booking.get('reservation_id')), esc(row['host']),
                   esc(booking.get('resource_type')),
                   esc(_booking_title(booking, row['host'])),
                   x0, by, bar_w, bh, colours[_clean(lease_key)],
                   x0 + 4, by + bh - 6, clip, esc(_booking_label(booking))))
        # The host's label.
        label = ['<g class="host-label">',
                 '<text class="host-name" x="8" y="%.1f">%s</text>'
                 % (y + 17, esc(row['host'])),
                 '<text class="host-info" x="8" y="%.1f">%s</text>'
                 % (y + 31, esc(row['info']))]
        if row['idle_until']:
            label.append('<text class="idle-badge" x="8" y="%.1f">'
                         'idle until %s</text>'
                         % (y + 45, esc(_fmt(parse_time(row['idle_until'])))))
        elif row['sizes']:
            label.append('<text class="host-info" x="8" y="%.1f">%s</text>'
                         % (y + 45, esc(row['sizes'])))
        label.append('</g>')
        part.extend(label)
        part.append('<line class="row-line" x1="0" y1="%.1f" x2="%.1f" '
                    'y2="%.1f"/>' % (y + height, plot_x + plot_w,
                                     y + height))
        part.append('</g>')
        row_parts.extend(part)
        y += height
    plot_bottom = y
    if not rows:
        row_parts.append('<text class="empty" x="%.1f" y="%.1f">no hosts'
                         '</text>' % (plot_x + 8, y + 20))
        plot_bottom = y + 30

    # The time axis (top) and its grid: times on one line, the date above
    # the first tick of each day (and at the window's start).
    axis = ['<g class="axis" data-tick-seconds="%d">' % spacing]
    daily = spacing >= 86400
    days = [(start, True)] if not daily else []
    for when in tick_times:
        x = scale.x(when)
        axis.append('<line class="grid" x1="%.1f" y1="%.1f" x2="%.1f" '
                    'y2="%.1f"/>' % (x, TOP - 6, x, plot_bottom))
        axis.append('<text class="tick" data-time="%s" x="%.1f" y="%.1f" '
                    'text-anchor="%s">%s</text>'
                    % (when.strftime('%Y-%m-%dT%H:%M:%SZ'), x, TOP - 10,
                       _anchor(x, plot_x, plot_w),
                       esc(when.strftime('%b %d' if daily else '%H:%M'))))
        if not daily and when.time() == datetime.time(0) and \
                when > start:
            days.append((when, False))
    for when, first in days:
        x = scale.x(when)
        if not first and x - scale.x(days[0][0]) < 60:
            continue
        axis.append('<text class="day" x="%.1f" y="%.1f" text-anchor="%s" '
                    'font-weight="bold">%s</text>'
                    % (x, TOP - 26, 'start' if first else
                       _anchor(x, plot_x, plot_w),
                       esc(when.strftime('%a %b %d %Y'))))
    axis.append('<text x="8" y="%.1f">UTC</text>' % (TOP - 10))
    axis.append('</g>')

    now_part = []
    if now is not None and start <= now <= end:
        x = scale.x(now)
        now_part = ['<g class="now" data-time="%s">'
                    '<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>'
                    '<text x="%.1f" y="%.1f">now</text></g>'
                    % (esc(body['now']), x, TOP - 6, x, plot_bottom + 4,
                       x - 12, plot_bottom + 16)]

    # The legend, under the rows.
    legend = ['<g class="legend">']
    ly = plot_bottom + 34
    lx = 8
    fixed = [
        ('<rect x="%.1f" y="%.1f" width="28" height="14" fill="#2e9e44" '
         'fill-opacity="0.40"/>', 'all free'),
        ('<rect x="%.1f" y="%.1f" width="28" height="14" fill="#2e9e44" '
         'fill-opacity="0.06" stroke="#bbb"/>', 'nothing free'),
        ('<rect x="%.1f" y="%.1f" width="28" height="14" '
         'fill="url(#idle-hatch)" stroke="#bbb"/>', 'idle host'),
        ('<line x1="{0:.1f}" y1="{1:.1f}" x2="{0:.1f}" y2="{2:.1f}" '
         'stroke="#d00" stroke-width="2"/>', 'now'),
    ]
    for shape, text in fixed:
        if text == 'now':
            legend.append(shape.format(lx + 14, ly - 2, ly + 16))
        else:
            legend.append(shape % (lx, ly))
        legend.append('<text x="%.1f" y="%.1f">%s</text>'
                      % (lx + 34, ly + 12, esc(text)))
        lx += 34 + 8 * len(text) + 24
    leases = _legend_leases(rows)
    lx = width
    for number, booking in enumerate(leases):
        item_w = min(400, 34 + 7 * len(_booking_label(booking)) + 30)
        if lx + item_w > width - 8:
            ly += 24
            lx = 8
        key = _lease_key(booking)
        clip = 'clip-legend-%d' % (number + 1)
        clip_defs.append('<clipPath id="%s"><rect x="%.1f" y="%.1f" '
                         'width="%d" height="20"/></clipPath>'
                         % (clip, lx, ly - 2, item_w - 10))
        legend.append(
            '<g class="legend-lease" data-lease-id="%s">'
            '<rect x="%.1f" y="%.1f" width="28" height="14" rx="3" fill="%s" '
            'stroke="#333" stroke-width="0.8"/>'
            '<text x="%.1f" y="%.1f" clip-path="url(#%s)">%s</text></g>'
            % (esc(booking.get('lease_id')), lx, ly, colours[_clean(key)],
               lx + 34, ly + 12, clip, esc(_booking_label(booking))))
        lx += item_w
    legend.append('</g>')
    total_h = ly + 30

    out.append('<svg xmlns="http://www.w3.org/2000/svg" class="capacity" '
               'width="%d" height="%d" viewBox="0 0 %d %d" '
               'font-family="%s" role="img" aria-label="%s">'
               % (width, total_h, width, total_h, FONT,
                  esc('capacity from %s to %s UTC' % (_fmt(start),
                                                      _fmt(end)))))
    out.append('<title>%s</title>' % esc(
        'nova_lease capacity from %s to %s UTC' % (_fmt(start), _fmt(end))))
    out.append('<style>%s</style>' % _STYLE)
    out.append('<defs><pattern id="idle-hatch" width="8" height="8" '
               'patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
               '<rect width="8" height="8" fill="#fff3d6" fill-opacity="0.6"/>'
               '<line x1="0" y1="0" x2="0" y2="8" stroke="#d49a1f" '
               'stroke-width="3" stroke-opacity="0.55"/></pattern>%s</defs>'
               % ''.join(clip_defs))
    out.append('<rect class="background" x="0" y="0" width="%d" height="%d" '
               'fill="#fff"/>' % (width, total_h))
    out.extend(axis)
    out.extend(row_parts)
    out.append('<line class="row-line" x1="%.1f" y1="%.1f" x2="%.1f" '
               'y2="%.1f"/>' % (plot_x, TOP, plot_x, plot_bottom))
    out.extend(now_part)
    out.extend(legend)
    out.append('</svg>')
    return '\n'.join(out) + '\n'


_PAGE_STYLE = """
body {font-family: DejaVu Sans, Verdana, Arial, sans-serif; margin: 20px;
      color: #222; background: #fff}
h1 {font-size: 22px; margin: 0 0 6px 0}
p.window {margin: 0 0 14px 0; color: #444}
table {border-collapse: collapse; margin: 0 0 16px 0; font-size: 13px}
th, td {border: 1px solid #ccc; padding: 3px 9px; text-align: right}
th:first-child, td:first-child, .text {text-align: left}
thead th {background: #f0f0f0}
h2 {font-size: 16px; margin: 18px 0 6px 0}
.picture svg {max-width: 100%; height: auto}
p.note {color: #555; font-size: 12px}
"""

_TOTAL_KEYS = ('capacity', 'used', 'promised', 'free')


def _totals_table(body):
    total = body.get('total') or {}
    resources = body.get('resources') or sorted(total)
    lines = ['<table class="totals"><thead><tr><th>resource</th>%s'
             '<th>free %%</th></tr></thead><tbody>'
             % ''.join('<th>%s</th>' % k for k in _TOTAL_KEYS)]
    for resource in resources:
        figures = total.get(resource)
        if not isinstance(figures, dict):
            continue
        cells = ''.join('<td>%s</td>' % esc(_number(figures.get(k, '-')))
                        for k in _TOTAL_KEYS)
        cap = figures.get('capacity') or 0
        share = ('%d%%' % round(100.0 * (figures.get('free') or 0) / cap)
                 if cap else '-')
        lines.append('<tr data-resource="%s"><td>%s</td>%s<td>%s</td></tr>'
                     % (esc(resource), esc(resource), cells, share))
    lines.append('</tbody></table>')
    return '\n'.join(lines)


def _bookings_table(body):
    start, end = parse_time(body['start']), parse_time(body['end'])
    rows = []
    for detail in body.get('host_details') or []:
        for booking in detail.get('bookings') or []:
            if _overlaps(booking, start, end):
                rows.append((parse_time(booking['start']),
                             detail.get('host'), booking))
    if not rows:
        return '<p class="note">No lease books a host in this window.</p>'
    lines = ['<table class="bookings"><thead><tr>%s<th>vCPUs</th>'
             '<th>RAM MB</th><th>disk GB</th></tr></thead><tbody>'
             % ''.join('<th class="text">%s</th>' % h for h in (
                 'lease', 'project', 'host', 'type', 'start (UTC)',
                 'end (UTC)'))]
    for when, host, booking in sorted(rows, key=lambda r: (r[0], _clean(
            r[1]))):
        lines.append(
            '<tr data-lease-id="%s"><td class="text">%s</td>'
            '<td class="text">%s</td><td class="text">%s</td>'
            '<td class="text">%s%s</td><td class="text">%s</td>'
            '<td class="text">%s</td>%s</tr>'
            % (esc(booking.get('lease_id')), esc(booking.get('lease_name')),
               esc(booking.get('project_id')), esc(host),
               esc(booking.get('resource_type')),
               ' (whole host)' if booking.get('whole_host') else '',
               esc(_fmt(when)), esc(_fmt_end(booking)),
               ''.join('<td>%s</td>' % esc(_number(booking.get(k, '-')))
                       for k in HOST_RESOURCES)))
    lines.append('</tbody></table>')
    return '\n'.join(lines)


def html(capacity, title='nova_lease capacity', width=WIDTH):
    """A self-contained HTML page of the capacity body (a str)."""
    body = _body(capacity)
    start = parse_time(body['start'])
    end = parse_time(body['end'])
    window = 'From %s to %s UTC, in steps of %s' % (
        _fmt(start), _fmt(end), _duration(body.get('step_seconds')))
    if body.get('now'):
        window += '; now is %s UTC' % _fmt(parse_time(body['now']))
    window += '; %s hosts.' % _number(body.get('hosts', 0))
    picture = svg(body, width=width)
    parts = [
        '<!DOCTYPE html>',
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width">',
        '<title>%s</title>' % esc(title),
        '<style>%s</style>' % _PAGE_STYLE,
        '</head><body>',
        '<h1>%s</h1>' % esc(title),
        '<p class="window">%s</p>' % esc(window),
        '<h2>Totals over the window</h2>',
        _totals_table(body),
        '<h2>Hosts over time</h2>',
        '<div class="picture">%s</div>' % picture,
    ]
    if body.get('host_details') is None:
        parts.append('<p class="note">Per-host rows and every lease need '
                     'the admin view (detail=hosts).</p>')
    parts += ['<h2>Bookings</h2>', _bookings_table(body),
              '</body></html>', '']
    return '\n'.join(parts)


def _duration(seconds):
    if not seconds:
        return '-'
    seconds = int(seconds)
    for unit, size in (('day', 86400), ('hour', 3600), ('minute', 60)):
        if seconds % size == 0:
            count = seconds // size
            return '%d %s%s' % (count, unit, '' if count == 1 else 's')
    return '%d seconds' % seconds
