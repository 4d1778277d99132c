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
"""Sphinx configuration of the nova_lease release notes (reno).

Build with ``tox -e releasenotes`` or ``tools/build-docs.sh
--releasenotes``. reno reads the notes of releasenotes/notes/ from the git
history, so the build needs a git clone, not a tarball.
"""

extensions = [
    'openstackdocstheme',
    'reno.sphinxext',
]

# openstackdocstheme
openstackdocs_repo_name = 'openstack/nova-lease'
openstackdocs_bug_project = 'nova-lease'
openstackdocs_bug_tag = 'releasenotes'
openstackdocs_auto_name = False

project = 'nova_lease Release Notes'
copyright = 'nova_lease developers'

source_suffix = {'.rst': 'restructuredtext'}
master_doc = 'index'
exclude_patterns = []
pygments_style = 'native'

# Release notes are not versioned: one set covers every release.
version = ''
release = ''

html_theme = 'openstackdocs'
html_static_path = ['_static']
templates_path = ['_templates']
