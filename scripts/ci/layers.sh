#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# scripts/ci/layers.sh: no include runs from a lower layer back up. Each header (and each impl/
# file, by the header it defines) belongs to one layer, lowest first:
#   core       core/ (with core/detail/), version.hpp: the standard library only
#   word wait  host/detail/ (futex, the architecture loops, timer slack, the bell waiter),
#              wordwait.hpp, doorbell.hpp: the host side's lowest rung, below the rest of host/
#   hosts      host/ (but host/detail/), line_life.hpp, line_watchers.hpp, line_health.hpp and
#              their umbrella line_retirement.hpp: threads, locks, the line's life
#   devices    device/: the simulated device, CUDA, HIP, Metal, Vulkan
#   asio       asio/ (the reactor service, the operations), the public port headers
# A file may include its own layer and the layers below; names each include that goes up and
# fails. Core also stays free of OS headers, Boost and vendor names (checked here too).
set -euo pipefail
cd "$(dirname "$0")/../.."
python3 - <<'PY'
import os, re, sys

root = 'include/gpu_async'
rank = {'core': 0, 'word wait': 1, 'hosts': 2, 'devices': 3, 'asio': 4}
impl_layer = {'wordwait': 'word wait', 'line_life': 'hosts', 'line_watchers': 'hosts',
              'line_health': 'hosts', 'wait_fd': 'hosts',
              'sim_device': 'devices', 'mapped_line': 'devices', 'mapped_vendor': 'devices', 'cuda': 'devices',
              'hip': 'devices', 'metal': 'devices', 'vulkan': 'devices'}
top_layer = {'version.hpp': 'core', 'wordwait.hpp': 'word wait', 'doorbell.hpp': 'word wait',
             'line_retirement.hpp': 'hosts', 'line_life.hpp': 'hosts', 'line_watchers.hpp': 'hosts',
             'line_health.hpp': 'hosts'}


def layer(rel):
    if rel.startswith('core/'):
        return 'core'
    # host/detail/ before host/: the word wait sits below the hosts that use it.
    for prefix, name in (('host/detail/', 'word wait'), ('host/', 'hosts'), ('device/', 'devices'),
                         ('asio/', 'asio')):
        if rel.startswith(prefix):
            return name
    base = os.path.basename(rel)
    if rel.startswith('impl/'):
        return impl_layer.get(base[:-len('.ipp')], 'asio')
    return top_layer.get(base, 'asio')


bad = []
core_forbidden = re.compile(r'#\s*include\s*<(boost/|asio|sys/|linux/|unistd|pthread|thread>|mutex>|'
                            r'condition_variable>|cuda|hip/|Metal|vulkan)')
for d, _, files in os.walk(root):
    for f in sorted(files):
        path = os.path.join(d, f)
        rel = os.path.relpath(path, root)
        mine = layer(rel)
        if rel.startswith('detail/'):
            bad.append(f'{path}: a layer-less detail/; put it in its layer\'s detail/ folder')
        with open(path) as src:
            for n, line in enumerate(src, 1):
                m = re.match(r'\s*#\s*include\s*<gpu_async/([^>]+)>', line)
                if m:
                    target = m.group(1)
                    # A header includes its own definitions (impl/) at its end: same layer.
                    if target.startswith('impl/') and rel.endswith('.hpp'):
                        continue
                    theirs = layer(target)
                    if rank[theirs] > rank[mine]:
                        bad.append(f'{path}:{n}: {mine} includes <gpu_async/{target}> ({theirs})')
                elif mine == 'core' and core_forbidden.match(line.strip()):
                    bad.append(f'{path}:{n}: core includes {line.strip()}')
for b in bad:
    print(b, file=sys.stderr)
if bad:
    sys.exit(f'layers.sh: {len(bad)} include(s) against the layers')
print('layers.sh: every include runs down or within its layer')
PY
