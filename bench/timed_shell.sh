#!/bin/bash
# Make's SHELL for a timed run: runs each recipe line as /bin/bash would and appends
#   wall_s user_s sys_s max_rss_kB status <TAB> the command (first 400 characters)
# to $TIMED_LOG, for bench/stage_times.py to add up by stage. Usage:
#   make reproduce-table1 SHELL=$PWD/bench/timed_shell.sh TIMED_LOG=$PWD/work/timed.log
# A command line is timed with its children; $(shell ...) calls are logged too (at ~0 s).
out=$(mktemp)
/usr/bin/time -f '%e %U %S %M' -o "$out" /bin/bash "$@"
status=$?
command=${*: -1}
printf '%s %s\t%s\n' "$(tail -n 1 "$out")" "$status" "$(printf '%s' "$command" | tr '\n\t' '  ' | head -c 400)" >> "${TIMED_LOG:-timed.log}"
rm -f "$out"
exit $status
