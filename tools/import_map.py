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
"""Who imports whom in nova_lease, read from the code (no import runs).

``python tools/import_map.py`` prints the picture that
doc/source/contributor/architecture.rst includes
(doc/source/contributor/import-map.inc); ``--write`` writes that file.
The documentation build (``tox -e docs``) writes it too, and
tests/unit/test_import_map.py fails when the file and the code differ, when
modules import each other in a cycle, and when project code is imported
inside a function (a hidden cycle) other than those listed there.
"""

import argparse
import ast
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = 'nova_lease'
INCLUDE = os.path.join(ROOT, 'doc', 'source', 'contributor',
                       'import-map.inc')


def modules(root=ROOT):
    """``{module name: path}`` of every module of the package."""
    found = {}
    base = os.path.join(root, PACKAGE)
    for folder, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if d not in ('versions',
                                                      '__pycache__'))
        for name in sorted(files):
            if not name.endswith('.py'):
                continue
            path = os.path.join(folder, name)
            module = os.path.relpath(path, root)[:-3].replace(os.sep, '.')
            if module.endswith('.__init__'):
                module = module[:-len('.__init__')]
            found[module] = path
    return found


def _resolve(name, known):
    """The module of ``known`` that ``name`` (a module, or ``module.attr``)
    is, or None.
    """
    while name and name not in known:
        name = name.rpartition('.')[0]
    return name or None


def _names(node):
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.module is None or node.level:
        return []
    return ['%s.%s' % (node.module, alias.name) for alias in node.names]


def imports(source, known, path='<source>'):
    """``(top, inner)``: the project modules ``source`` imports at module
    level (``{module}``) and inside a function or method
    (``{(module, line)}``).
    """
    tree = ast.parse(source, path)
    top, inner = set(), set()

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                for name in _names(child):
                    if not name.startswith(PACKAGE):
                        continue
                    module = _resolve(name, known)
                    if module is None:
                        continue
                    if in_function:
                        inner.add((module, child.lineno))
                    else:
                        top.add(module)
            visit(child, in_function or isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, False)
    return top, inner


def graph(root=ROOT):
    """``(edges, inner)``: ``{module: {modules it imports at module
    level}}`` and ``{module: {(module, line) imported in a function}}``.
    """
    known = modules(root)
    edges, inner = {}, {}
    for module, path in known.items():
        with open(path) as f:
            top, hidden = imports(f.read(), known, path)
        edges[module] = top - {module}
        inner[module] = hidden
    return edges, inner


def cycles(edges):
    """The strongly connected components of ``edges`` with more than one
    member (Tarjan's algorithm, iterative), each sorted, sorted.
    """
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    members = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        members.append(member)
                        if member == node:
                            break
                    if len(members) > 1:
                        out.append(sorted(members))
    return sorted(out)


def part(module):
    """The part of nova_lease a module belongs to: its first-level
    package or module (``nova_lease.db.claims`` -> ``db``).
    """
    parts = module.split('.')
    return parts[1] if len(parts) > 1 else '(root)'


def parts_graph(edges):
    """``{part: {parts it imports}}`` of a module graph."""
    out = {}
    for module, targets in edges.items():
        mine = part(module)
        out.setdefault(mine, set()).update(
            part(t) for t in targets if part(t) != mine)
    return out


def render(root=ROOT):
    """The reStructuredText of the import picture."""
    edges, inner = graph(root)
    parts = parts_graph(edges)
    tangled = cycles(parts)
    lines = [
        '.. This file is written by tools/import_map.py (tox -e docs runs',
        '   it); tests/unit/test_import_map.py checks it. Do not edit.',
        '',
        'Each part of ``nova_lease`` (a first-level package or module) and',
        'the parts its modules import at module level:',
        '',
        '::',
        '',
    ]
    width = max(len(p) for p in parts)
    for name in sorted(parts):
        lines.append('    %s -> %s' % (name.ljust(width), ', '.join(
            sorted(parts[name])) or '(nothing of nova_lease)'))
    lines.append('')
    if tangled:
        lines.append('Parts that import each other, directly or through '
                     'others (each group is one cycle between packages; '
                     'between modules there is none):')
        lines.append('')
        for group in tangled:
            lines.append('* %s' % ', '.join('``%s``' % p for p in group))
        lines.append('')
    hidden = sorted((m, t) for m, found in inner.items() for t, _ in found)
    lines.append('Project modules imported inside a function: %d (listed, '
                 'with why, in tests/unit/test_import_map.py).'
                 % len(set(hidden)))
    lines.append('')
    return '\n'.join(lines)


def write(root=ROOT, path=INCLUDE):
    """Write the picture to ``path`` if it changed; return whether."""
    text = render(root)
    try:
        with open(path) as f:
            if f.read() == text:
                return False
    except FileNotFoundError:
        pass
    with open(path, 'w') as f:
        f.write(text)
    return True


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--write', action='store_true',
                        help='write %s' % os.path.relpath(INCLUDE, ROOT))
    args = parser.parse_args(argv)
    if args.write:
        print('written' if write() else 'unchanged')
    else:
        sys.stdout.write(render())
    return 0


if __name__ == '__main__':
    sys.exit(main())
