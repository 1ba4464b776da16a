#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# scripts/ci/layers.sh: no include runs from a lower layer back up. Each folder under
# include/gpu_async/ is one layer (with its own detail/ and impl/), lowest first:
#   core/    the standard library only: no Boost, no OS headers, no threads, no vendor names
#   wait/    the word wait, the doorbell, futex, the architecture loops, clock and locks
#   line/    a line's life, health and watchers
#   device/  the simulated device, CUDA, HIP, Metal, Vulkan
#   host/    the std host: std_watcher, the fd notifier, the blocking wait
#   fill/    the FILL runtime: its executor, reactor, executor kinds, bands, idles
#   asio/    the port, run_fill, the error bridge; the service and operations in asio/detail/
# The top level holds version.hpp (core) and the umbrella, src.hpp and forwarding headers (above
# every layer). A file may include its own layer and the layers below; names each include that
# goes up and fails. Core also stays free of OS headers, Boost and vendor names (checked here).
set -euo pipefail
cd "$(dirname "$0")/../.."
python3 - <<'PY'
import os, re, sys

root = 'include/gpu_async'
layers = ['core', 'wait', 'line', 'device', 'host', 'fill', 'asio', 'top']
rank = {name: i for i, name in enumerate(layers)}


def layer(rel):
    head = rel.split('/', 1)
    if len(head) == 2:
        if head[0] not in rank or head[0] == 'top':
            return None
        return head[0]
    return 'core' if rel == 'version.hpp' else 'top'


bad = []
core_forbidden = re.compile(r'#\s*include\s*<(boost/|asio|sys/|linux/|unistd|pthread|thread>|mutex>|'
                            r'condition_variable>|cuda|hip/|Metal|vulkan)')
for d, _, files in os.walk(root):
    for f in sorted(files):
        path = os.path.join(d, f)
        rel = os.path.relpath(path, root)
        mine = layer(rel)
        if mine is None:
            bad.append(f'{path}: in no layer\'s folder ({", ".join(layers[:-1])})')
            continue
        with open(path) as src:
            for n, line in enumerate(src, 1):
                m = re.match(r'\s*#\s*include\s*<gpu_async/([^>]+)>', line)
                if m:
                    target = m.group(1)
                    theirs = layer(target)
                    if theirs is None or rank[theirs] > rank[mine]:
                        bad.append(f'{path}:{n}: {mine} includes <gpu_async/{target}> ({theirs})')
                elif mine == 'core' and core_forbidden.match(line.strip()):
                    bad.append(f'{path}:{n}: core includes {line.strip()}')
for b in bad:
    print(b, file=sys.stderr)
if bad:
    sys.exit(f'layers.sh: {len(bad)} include(s) against the layers')
print('layers.sh: every include runs down or within its layer')
PY
