#!/bin/bash
# main's service (parts of 16 chunks) against the give-way build's, and in-process.
export XDG_RUNTIME_DIR=/tmp/xdg-gw; rm -rf $XDG_RUNTIME_DIR; mkdir -p -m 700 $XDG_RUNTIME_DIR/a $XDG_RUNTIME_DIR/b
/tmp/aiscp-main --serve --backend host --socket $XDG_RUNTIME_DIR/a/s > /dev/null 2>&1 & p1=$!
/tmp/aiscp-gw --serve --backend host --socket $XDG_RUNTIME_DIR/b/s > /dev/null 2>&1 & p2=$!
sleep 1
for r in $(seq ${ROUNDS:-7}); do
  for way in inproc main gw; do
    rm -f /dev/shm/dst; sync; echo 3 > /proc/sys/vm/drop_caches
    case $way in inproc) e=AISCP_SERVICE=off b=/tmp/aiscp-gw;; main) e=AISCP_SERVICE=$XDG_RUNTIME_DIR/a/s b=/tmp/aiscp-main;; gw) e=AISCP_SERVICE=$XDG_RUNTIME_DIR/b/s b=/tmp/aiscp-gw;; esac
    t=$( { TIMEFORMAT=%R; time { env $e $b --backend host /dev/shm/big/f /dev/shm/dst && sync; }; } 2>&1 )
    echo "$way	$r	$t"
  done
done
kill $p1 $p2
