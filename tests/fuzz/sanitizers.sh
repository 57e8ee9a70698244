#!/bin/sh
# sanitizers.sh — the fuzz corpus replays run under ASan+UBSan with leak
# checking; prove it: replay_sancheck replays planted bugs (a leak, a
# heap overflow, a signed overflow) and each must fail the replay with
# the sanitizer's report, while a clean input passes.
# SPDX-License-Identifier: GPL-2.0-or-later
b="${top_builddir:-.}/tests/fuzz/replay_sancheck"
# as in the generated tests/fuzz/replay_*.sh
ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1"
export ASAN_OPTIONS UBSAN_OPTIONS
if ! "$b" | grep -q '^# replayed under ASan+UBSan'; then
	echo "the compiler cannot build the replays with -fsanitize=address,undefined" >&2
	exit 77
fi
d=$(mktemp -d "${TMPDIR:-/tmp}/berth-sancheck.XXXXXX") || exit 1
trap 'rm -rf "$d"' EXIT
n=0
check() {	# name input pass|fail report-text
	n=$((n + 1))
	printf '%s' "$2" > "$d/$1"
	"$b" "$d/$1" > "$d/out" 2> "$d/err"
	rc=$?
	if [ "$3" = pass ]; then
		if [ $rc -eq 0 ]; then
			echo "ok $n - $1: a clean input passes"
		else
			echo "not ok $n - $1: a clean input failed (exit $rc)"
			cat "$d/err" >&2
		fi
	elif [ $rc -ne 0 ] && grep -q "$4" "$d/err"; then
		echo "ok $n - $1: '$4' fails the replay (exit $rc)"
	else
		echo "not ok $n - $1: exit $rc, no '$4' report"
		cat "$d/err" >&2
	fi
}
check clean hello pass
check leak leak fail 'ERROR: LeakSanitizer: detected memory leaks'
check heap heap fail 'ERROR: AddressSanitizer: heap-buffer-overflow'
check ub ub fail 'runtime error: signed integer overflow'
check named heap fail "replay: died on input $d/named"
echo "1..$n"
