#!/bin/bash
# Runs every memlens benchmark: region profiling (regions.sh), the event queue (queue.sh), then
# basic blocks (bb.sh) if present.
cd "$(dirname "$0")" || exit 1
rc=0
./regions.sh || rc=1
./queue.sh || rc=1
if [ -x bb.sh ]; then
    ./bb.sh || rc=1
fi
exit $rc
