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
"""Sphinx configuration of the nova_lease documentation.

Build with ``tox -e docs`` or ``tools/build-docs.sh``; both run
``sphinx-build -W --keep-going``, so every warning (a broken reference, an
option or rule that moved) fails the build.

The configuration reference and the policy reference are generated from
the code through the ``oslo.config.opts`` and ``oslo.policy.policies``
entry points (namespace ``nova_lease``), so nova_lease must be installed
in the environment that runs Sphinx.
"""

import os
import sys

# The import picture of contributor/architecture.rst, written from the
# code at every build (tests/unit/test_import_map.py checks the copy in
# the tree).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(
    __file__)), '..', '..', 'tools'))
import import_map  # noqa: E402

import_map.write()

extensions = [
    'openstackdocstheme',
    'oslo_config.sphinxext',
    'oslo_config.sphinxconfiggen',
    'oslo_policy.sphinxext',
    'oslo_policy.sphinxpolicygen',
]

# oslo_config.sphinxconfiggen: writes _static/nova_lease.conf.sample from
# the same generator configuration as "tox -e genconfig".
config_generator_config_file = [
    ('../../etc/nova_lease/nova_lease-config-generator.conf',
     '_static/nova_lease'),
]

# oslo_policy.sphinxpolicygen: writes _static/nova_lease.policy.yaml.sample
# from the same generator configuration as "tox -e genpolicy".
policy_generator_config_file = [
    ('../../etc/nova_lease/nova_lease-policy-generator.conf',
     '_static/nova_lease'),
]

# openstackdocstheme
openstackdocs_repo_name = 'openstack/nova-lease'
openstackdocs_bug_project = 'nova-lease'
openstackdocs_bug_tag = 'doc'
openstackdocs_auto_name = False

project = 'nova_lease'
copyright = 'nova_lease developers'

source_suffix = {'.rst': 'restructuredtext'}
master_doc = 'index'
exclude_patterns = []
add_module_names = False
show_authors = False
pygments_style = 'native'

html_theme = 'openstackdocs'
html_static_path = ['_static']
html_extra_path = []
