#!/bin/bash
# Device commands of run 18 (two calls on one machine, 191 s and 206 s), with .bench/r18
# carried: aiscp = release build of ab228b1, xcp 0.24.9, rawbw.c:
mkdir -p /tmp/r18a && OUT=/tmp/r18a timeout 580 bash bench/h200-service-all.sh a .bench/r18 > /tmp/r18a/all-a.log 2>&1
mkdir -p /tmp/r18b && OUT=/tmp/r18b timeout 580 bash bench/h200-service-all.sh b .bench/r18 > /tmp/r18b/all-b.log 2>&1
# (the services' logs are not kept)
