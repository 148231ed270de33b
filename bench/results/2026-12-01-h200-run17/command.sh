#!/bin/bash
# Device command of run 17 (one call, 132 s, on the machine of runs 15 and 16), with .bench/r17
# carried: aiscp = release build of 37379a9, rawbw.c:
OUT=$OUT timeout 400 bash bench/h200-service-slots.sh .bench/r17 > $OUT/slots.log 2>&1
