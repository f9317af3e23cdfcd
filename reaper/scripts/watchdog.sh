#!/bin/sh
# rightsize-go watchdog (POSIX sh; runs unchanged under dash, bash --posix and
# busybox ash).
#
# A Go test process spawns this once, as `sh -c "$script" rightsize-watchdog
# ARGS...` (the text itself, never a file someone could change after the
# spawn), with stdin the read end of a pipe whose write end only that
# process holds. The process tells the script, on that pipe, what it
# created; at EOF (the owner exited: clean exit, panic, SIGKILL alike) the
# script removes it, finds and removes what still carries the run's label,
# and deletes the run's ledger files.
#
#   sh -c SCRIPT NAME RUNS_DIR RUN_ID [STEP ...]
#   STEP := KIND ROLE MODE GONE RETRY N WORD1 ... WORDN
#
#   RUNS_DIR  absolute path of the ledger's runs folder
#   RUN_ID    file stem: RUNS_DIR/RUN_ID.json, .gorecord, .sandboxes, .networks
#   KIND      sandboxes | networks
#   ROLE      act: WORDS with ids (or names) appended removes them
#             find: WORDS, complete, prints "ID|NAME|MARK" for each sandbox
#             or network carrying the run's label. A KIND with a finder is
#             "labelled": its second pass acts on what the finder prints,
#             never on a name from anywhere else
#   MODE      batch: one call with every id, then one call per id if that
#             failed; each: one call per id (a finder's is ignored: "-")
#   GONE      newline-separated fixed strings: a failed call on one id whose
#             output holds one of them means "does not exist" (exit 126 and
#             127 never do)
#   RETRY     newline-separated fixed strings: a failed call whose output
#             holds one of them is run once more after 0.5 s
#   N WORDS   the command (WORD1 an absolute program path) and its leading
#             arguments
#
# What the owner tells, one line each on stdin (anything else is ignored):
#
#   +s ID NAME   a sandbox it created (or is creating: msb tells the name
#                as ID before the create)
#   -s ID NAME   one it removed itself
#   +n ID NAME   a network; -n ID NAME
#   +x ID NAME   a command (the engine's exec id) running in sandbox NAME,
#                which its lease ends when the owner dies; -x ID NAME when
#                it ended (for the run's fate only: nothing is done to it)
#
# At EOF, the first pass runs every act step over the told ids, at once:
# nothing is forked before the first removal but the time bound and the
# engine's command. Then, RIGHTSIZE_WATCHDOG_SETTLE seconds later (default
# 2; 0 for no wait), the second pass: for a labelled kind, its finder, then
# its act steps over what it found (a create the owner sent just before it
# died, finished by the engine after the first pass, is found there); for
# another kind, the act steps over the told names again.
#
# Decision: a labelled kind is clean when its finder answered and whatever
# it found was removed (or was gone). Another kind keeps each told name
# whose last act step failed. When every kind is clean and nothing is kept,
# the line files and then the record are deleted; otherwise the record
# stays for a later sweep, a labelled kind's line file is left as it is (a
# superset of what lives), and another kind's is rewritten with what it
# keeps.
#
# When it had anything to do, the watchdog writes the run's fate to
# RUNS_DIR/../fates/RUN_ID-<ms>.json (see ledger/fates.go): each id and
# name with "removed" or "kept", the commands that ended with the owner,
# and the owner as its stub (RUNS_DIR/../fates/.RUN_ID.owner, written by
# the owner before the spawn) describes it. Its noticedIso is when the
# first pass ended: no clock is read before the first removal.
#
# Each call is bounded by RIGHTSIZE_WATCHDOG_CALL_TIMEOUT seconds (default
# 120) where timeout(1) works: a call stopped for it has failed, whatever it
# printed, and every later call is skipped (failed too).
#
# Nothing read from the pipe or from an engine's output is ever run: ids and
# names are checked against [A-Za-z0-9][A-Za-z0-9_.-]{0,127} with case
# patterns (no fork), and passed as separate arguments; no eval, no
# unquoted expansion of anything read but checked words, with globbing off.

set -u
set -f
# What it writes (the fate, a rewritten list) is the user's alone, as every
# other file of the cache dir.
umask 077

LC_ALL=C
export LC_ALL
PATH=${PATH:+$PATH:}/usr/bin:/bin
export PATH

# A terminal hangup or ^C aimed at the owner must not kill the watchdog before
# it has done its job; a closed stderr must not kill it while it logs.
trap '' HUP INT QUIT PIPE

run_id_for_log='?'

log() {
	printf 'rightsize watchdog [%s]: %s\n' "$run_id_for_log" "$*" >&2
}

usage() {
	log "$1"
	printf 'usage: watchdog RUNS_DIR RUN_ID [KIND ROLE MODE GONE RETRY N WORD1 ... WORDN] ...\n' >&2
	exit 2
}

# ---------------------------------------------------------------------------
# Arguments: everything is checked before waiting, so a caller that passes
# nonsense learns it at once (exit 2), not after it died.

[ "$#" -ge 2 ] || usage "need RUNS_DIR and RUN_ID"
runs_dir=$1
run_id=$2
shift 2

case $run_id in
'' | */* | .* | -*) usage "refusing RUN_ID '$run_id': empty, contains '/', or starts with '.' or '-'" ;;
esac
run_id_for_log=$run_id
case $runs_dir in
/*) ;;
*) usage "RUNS_DIR '$runs_dir' is not an absolute path" ;;
esac

# check_steps validates the step list and records, per kind, whether it has
# a finder and the index of its last act step (the one that decides).
find_s=
find_n=
last_s=0
last_n=0
check_steps() {
	_i=0
	while [ "$#" -gt 0 ]; do
		_i=$((_i + 1))
		[ "$#" -ge 7 ] || usage "step $_i: need KIND ROLE MODE GONE RETRY N WORD1..."
		case $1 in
		sandboxes | networks) ;;
		*) usage "step $_i: KIND '$1' is not sandboxes or networks" ;;
		esac
		case $2 in
		find)
			case $1 in
			sandboxes) find_s=yes ;;
			*) find_n=yes ;;
			esac
			;;
		act)
			case $3 in
			batch | each) ;;
			*) usage "step $_i: MODE '$3' is not batch or each" ;;
			esac
			case $1 in
			sandboxes) last_s=$_i ;;
			*) last_n=$_i ;;
			esac
			;;
		*) usage "step $_i: ROLE '$2' is not act or find" ;;
		esac
		case $6 in
		[1-9] | [1-9][0-9] | [1-9][0-9][0-9]) ;;
		*) usage "step $_i: N '$6' is not a number from 1 to 999" ;;
		esac
		_n=$6
		shift 6
		[ "$#" -ge "$_n" ] || usage "step $_i: N is $_n but only $# words follow"
		case $1 in
		/*) ;;
		*) usage "step $_i: program '$1' is not an absolute path" ;;
		esac
		shift "$_n"
	done
}
check_steps "$@"

command -v rm >/dev/null 2>&1 || usage "required tool 'rm' not found in PATH"

# An engine that takes the connection and never answers must not hold the
# watchdog, or its names, for ever: each call is bounded by
# RIGHTSIZE_WATCHDOG_CALL_TIMEOUT seconds (a whole number from 1; default
# 120), then SIGKILLed 10 s later if it ignored the SIGTERM, where a
# timeout(1) command with -k works (coreutils; busybox from 1.30). Checked
# now, before the wait, so that the owner's death costs no probe.
call_bound=
call_kill=10
call_timeout=${RIGHTSIZE_WATCHDOG_CALL_TIMEOUT:-120}
case $call_timeout in
'' | *[!0-9]* | 0*) call_timeout=120 ;;
esac
# No redirection here: the shell would hold /dev/null in place of its own
# stdin for the probe's length. It inherits the pipe and reads nothing.
if timeout -k "$call_kill" "$call_timeout" true; then
	call_bound=yes
fi
engine_hung=

# Do not pin the caller's working directory (it may be a test's temp dir).
cd / || :

# ---------------------------------------------------------------------------
# Told ids: " ID/NAME ID/NAME " per kind. '/' is in neither grammar, so the
# pair is one word; set_add and set_del change it with parameter expansion
# only.

told_s=' '
told_n=' '
told_x=' '

# ok_word VALUE: a word of the family's name grammar, checked by case
# patterns alone.
ok_word() {
	case $1 in
	'' | [!A-Za-z0-9]* | *[!A-Za-z0-9_.-]*) return 1 ;;
	esac
	[ "${#1}" -le 128 ]
}

# set_op OP KIND ID NAME: adds or deletes ID/NAME in the kind's set.
set_op() {
	case $2 in
	s) _set=$told_s ;;
	x) _set=$told_x ;;
	*) _set=$told_n ;;
	esac
	case $_set in
	*" $3/"*)
		_pre=${_set%%" $3/"*}
		_post=${_set#*" $3/"}
		_post=${_post#* }
		_set="$_pre $_post"
		;;
	esac
	[ "$1" = + ] && _set="$_set$3/$4 "
	case $2 in
	s) told_s=$_set ;;
	x) told_x=$_set ;;
	*) told_n=$_set ;;
	esac
}

# ---------------------------------------------------------------------------
# Wait. Only the read builtin runs here: no child process, no CPU while
# nothing arrives. read fails at EOF (also for a last line without newline),
# and that ends the loop.

while IFS=' ' read -r _op _id _name _rest; do
	case $_op in
	+s | -s | +n | -n | +x | -x) ;;
	*) continue ;;
	esac
	ok_word "$_id" || continue
	ok_word "${_name:-$_id}" || continue
	set_op "${_op%?}" "${_op#?}" "$_id" "${_name:-$_id}"
done
_op='' _id='' _name='' _rest=''

log "owner gone (stdin closed): reaping run $run_id in $runs_dir"

rec=$runs_dir/$run_id.json
own_rec=$runs_dir/$run_id.gorecord
sb_file=$runs_dir/$run_id.sandboxes
net_file=$runs_dir/$run_id.networks

# ---------------------------------------------------------------------------
# Calls.

# matches PATTERNS: whether $call_out holds one of the newline-separated fixed
# strings in PATTERNS (empty lines are no pattern).
matches() {
	while IFS= read -r _pat; do
		[ -n "$_pat" ] || continue
		case $call_out in
		*"$_pat"*) return 0 ;;
		esac
	done <<EOF
$1
EOF
	return 1
}

# call CMD...: runs it once, output captured; sets call_rc and call_out.
call() {
	if [ -n "$call_bound" ]; then
		call_out=$(timeout -k "$call_kill" "$call_timeout" "$@" </dev/null 2>&1)
	else
		call_out=$("$@" </dev/null 2>&1)
	fi
	call_rc=$?
}

# timed_out: whether the last call was stopped by its time bound. coreutils'
# timeout exits 124; busybox's ends the call with SIGTERM (143); either
# ends it with SIGKILL (137) when it ignored the SIGTERM.
timed_out() {
	[ -n "$call_bound" ] || return 1
	case $call_rc in
	124 | 137 | 143) return 0 ;;
	esac
	return 1
}

# classify: sets call_result from call_rc and call_out: ok | gone | retry | fail.
# A batch call is never "gone": its output cannot say which id is missing.
classify() {
	if [ "$call_rc" -eq 0 ]; then
		call_result=ok
	elif timed_out; then
		call_result=fail
		engine_hung=yes
	elif [ "$call_rc" -eq 126 ] || [ "$call_rc" -eq 127 ]; then
		call_result=fail
	elif [ "$call_batch" = no ] && matches "$step_gone"; then
		call_result=gone
	elif matches "$step_retry"; then
		call_result=retry
	else
		call_result=fail
	fi
}

log_call() {
	if timed_out; then
		log "$step_label $1: exit $call_rc: no answer within ${call_timeout}s, stopped; later calls are skipped"
	else
		log "$step_label $1: exit $call_rc ($call_result)"
	fi
	if [ "$call_rc" -ne 0 ] && [ -n "$call_out" ]; then
		printf '%s\n' "$call_out" | sed -e 's/^/    | /' >&2
	fi
}

# attempt WHAT CMD...: one call, and once more after 0.5 s if its output asked
# for a retry. Sets call_result: ok | gone | fail.
attempt() {
	_what=$1
	shift
	if [ -n "$engine_hung" ]; then
		call_result=fail
		log "$step_label $_what: not tried, the engine did not answer an earlier call (fail)"
		return 0
	fi
	call "$@"
	classify
	log_call "$_what"
	if [ "$call_result" = retry ]; then
		sleep 0.5 2>/dev/null || sleep 1
		call "$@"
		classify
		[ "$call_result" = retry ] && call_result=fail
		log_call "$_what (retry)"
	fi
}

# batch_call WORDS...: one call of WORDS with every id of step_set appended
# (in this function's own arguments: the caller's stay the command).
batch_call() {
	for _tok in $step_set; do
		set -- "$@" "${_tok%%/*}"
	done
	call_batch=yes
	attempt "batch" "$@"
	call_batch=no
}

# act WORDS...: acts on $step_set (" ID/NAME ... ") with the command WORDS:
# batch, then one at a time if the batch failed (unless step_quick: the
# first pass of a labelled kind, whose second pass decides anyway); sets
# step_failed (" ID/NAME ... ").
act() {
	step_failed=' '
	if [ "$step_mode" = batch ]; then
		batch_call "$@"
		[ "$call_result" = ok ] && return 0
		if [ -n "$step_quick" ]; then
			step_failed=$step_set
			return 0
		fi
		log "$step_label: the batch call failed; one at a time"
	fi
	for _tok in $step_set; do
		attempt "${_tok#*/}" "$@" "${_tok%%/*}"
		case $call_result in
		ok | gone) ;;
		*) step_failed="$step_failed$_tok " ;;
		esac
	done
}

# find WORDS...: runs the finder; sets found (" ID/NAME ... ") and
# find_ok (yes | no).
find_run() {
	found=' '
	find_ok=no
	if [ -n "$engine_hung" ]; then
		log "$step_label: not tried, the engine did not answer an earlier call"
		return 0
	fi
	call_batch=yes
	call "$@"
	step_gone='' step_retry=''
	classify
	call_batch=no
	log_call "finder"
	[ "$call_result" = ok ] || return 0
	find_ok=yes
	while IFS='|' read -r _fid _fname _fmark; do
		[ -n "$_fid$_fname" ] || continue
		_fname=${_fname#/}
		if ! ok_word "$_fid" || ! ok_word "${_fname:-$_fid}"; then
			log "finder: skipped a line that is not an id and a name"
			continue
		fi
		case $_fname in
		rz-reuse-*) continue ;;
		esac
		[ -z "$_fmark" ] || continue
		found="$found$_fid/${_fname:-$_fid} "
	done <<EOF
$call_out
EOF
}

# run_pass PASS STEP...: one pass of the steps. Pass 1 acts on the told
# sets; pass 2 finds first for a labelled kind. Sets kept_s and kept_n
# (" ID/NAME ... " for a kind without a finder) and clean_s, clean_n.
run_pass() {
	_pass=$1
	shift
	step_i=0
	clean_s=yes
	clean_n=yes
	kept_s=' '
	kept_n=' '
	found_s=' '
	found_n=' '
	while [ "$#" -gt 0 ]; do
		step_i=$((step_i + 1))
		step_kind=$1 step_role=$2 step_mode=$3 step_gone=$4 step_retry=$5 step_n=$6
		shift 6
		step_label="pass $_pass step $step_i ($step_kind $step_role)"
		run_one "$@"
		shift "$step_n"
	done
}

# mark_unclean: the current kind is not clean.
mark_unclean() {
	case $step_kind in
	sandboxes) clean_s=no ;;
	*) clean_n=no ;;
	esac
}

# run_one WORDS... REST...: the current step with its first $step_n
# arguments as the command.
run_one() {
	_total=$#
	_k=0
	while [ "$_k" -lt "$_total" ]; do
		_k=$((_k + 1))
		[ "$_k" -le "$step_n" ] && set -- "$@" "$1"
		shift
	done
	labelled=$find_n
	[ "$step_kind" = sandboxes ] && labelled=$find_s
	if [ ! -f "$1" ] || [ ! -x "$1" ]; then
		log "$step_label: program '$1' is not an executable file"
		mark_unclean
		if [ -z "$labelled" ]; then
			case $step_kind in
			sandboxes) kept_s=$told_s ;;
			*) kept_n=$told_n ;;
			esac
		fi
		return 0
	fi
	if [ "$step_role" = find ]; then
		[ "$_pass" = 2 ] || return 0
		find_run "$@"
		[ "$find_ok" = yes ] || mark_unclean
		case $step_kind in
		sandboxes) found_s=$found ;;
		*) found_n=$found ;;
		esac
		return 0
	fi
	step_quick=
	if [ -n "$labelled" ] && [ "$_pass" = 2 ]; then
		# What the finder found, and what the first pass could not remove
		# (a told id without the run's label would not be found again).
		step_set=$found_n
		_again=$again_n
		if [ "$step_kind" = sandboxes ]; then
			step_set=$found_s
			_again=$again_s
		fi
		for _tok in $_again; do
			case $step_set in
			*" ${_tok%%/*}/"*) ;;
			*) step_set="$step_set$_tok " ;;
			esac
		done
	else
		step_set=$told_n
		[ "$step_kind" = sandboxes ] && step_set=$told_s
		[ -n "$labelled" ] && step_quick=yes
	fi
	step_failed=' '
	if [ "$step_set" = ' ' ]; then
		log "$step_label: nothing to act on"
	else
		act "$@"
	fi
	if [ -n "$labelled" ]; then
		if [ "$_pass" = 2 ]; then
			[ "$step_failed" != ' ' ] && mark_unclean
			case $step_kind in
			sandboxes) final_s=$step_failed ;;
			*) final_n=$step_failed ;;
			esac
		fi
		if [ "$_pass" = 1 ]; then
			case $step_kind in
			sandboxes) again_s=$step_failed ;;
			*) again_n=$step_failed ;;
			esac
		fi
		return 0
	fi
	if [ "$step_kind" = sandboxes ] && [ "$step_i" -eq "$last_s" ]; then
		kept_s=$step_failed
	elif [ "$step_kind" = networks ] && [ "$step_i" -eq "$last_n" ]; then
		kept_n=$step_failed
	fi
}

call_batch=no
again_s=' '
again_n=' '
final_s=' '
final_n=' '

run_pass 1 "$@"
# The fate's time: when the first pass ended (no clock is read before it).
fate_time=$(date -u '+%s %Y-%m-%dT%H:%M:%SZ' 2>/dev/null) || fate_time=
settle=${RIGHTSIZE_WATCHDOG_SETTLE:-2}
case $settle in
'' | *[!0-9.]* | .*) settle=2 ;;
esac
case $settle in
0 | 0.0)
	# No wait; a labelled kind still needs its finder to decide.
	[ -n "$find_s$find_n" ] && run_pass 2 "$@"
	;;
*)
	if [ -z "$engine_hung" ]; then
		log "second pass in ${settle}s: a create sent just before the owner died may finish after the first"
		sleep "$settle" 2>/dev/null || sleep 2
	fi
	run_pass 2 "$@"
	;;
esac

# A kind no step acts on keeps what it was told.
[ "$last_s" -eq 0 ] && [ "$told_s" != ' ' ] && clean_s=no kept_s=$told_s && log "no step for sandboxes: every sandbox is kept"
[ "$last_n" -eq 0 ] && [ "$told_n" != ' ' ] && clean_n=no kept_n=$told_n && log "no step for networks: every network is kept"
[ -n "$engine_hung" ] && clean_s=no clean_n=no

# ---------------------------------------------------------------------------
# The run's fate.

fate_items=''
fate_count=0
# fate_add KIND ID NAME OUTCOME [NOTE]: one item; ids and names are checked
# words and notes this script's own text, so they need no escaping in JSON.
# At most 200 items.
fate_add() {
	[ "$fate_count" -lt 200 ] || return 0
	fate_count=$((fate_count + 1))
	[ -n "$fate_items" ] && fate_items="$fate_items,"
	_note=
	[ -n "${5:-}" ] && _note=",\"note\":\"$5\""
	fate_items="$fate_items{\"kind\":\"$1\",\"id\":\"$2\",\"name\":\"$3\",\"outcome\":\"$4\"$_note}"
}

# kept_note: why the watchdog kept what it kept.
kept_note() {
	if [ -n "$engine_hung" ]; then
		printf 'the engine did not answer within %ss' "$call_timeout"
	else
		printf 'its removal failed (the engine may be down; RIGHTSIZE_REAPER_DEBUG=1 keeps the log of why)'
	fi
}

# fate_kind KIND TOLD FOUND BAD: an item per id told or found, kept when
# it is in BAD (what failed last), removed otherwise.
fate_kind() {
	_fk=$1 _bad=$4 _why=$(kept_note)
	for _tok in $2 $3; do
		case "$_seen " in
		*" ${_tok%%/*} "*) continue ;;
		esac
		_seen="$_seen ${_tok%%/*}"
		case $_bad in
		*" ${_tok%%/*}/"*) fate_add "$_fk" "${_tok%%/*}" "${_tok#*/}" kept "$_why" ;;
		*) fate_add "$_fk" "${_tok%%/*}" "${_tok#*/}" removed ;;
		esac
	done
}

write_fate() {
	_fates=${runs_dir%/*}/fates
	if [ -L "$_fates" ] || [ ! -d "$_fates" ] || [ -z "$fate_time" ]; then
		return 0
	fi
	_seen=''
	_bad_s="$final_s$kept_s"
	_bad_n="$final_n$kept_n"
	[ -n "$engine_hung" ] && _bad_s="$_bad_s$again_s" _bad_n="$_bad_n$again_n"
	fate_kind sandbox "$told_s" "$found_s" "$_bad_s"
	fate_kind network "$told_n" "$found_n" "$_bad_n"
	for _tok in $told_x; do
		fate_add exec "${_tok%%/*}" "${_tok#*/}" ended
	done
	[ -n "$fate_items" ] || return 0
	_secs=${fate_time%% *}
	_iso=${fate_time#* }
	_end=$(date -u +%Y-%m-%dT%H:%M:%SZ 2>/dev/null) || _end=$_iso
	_stub=$_fates/.$run_id.owner
	_tmp=$_fates/.$run_id.fate.tmp.$$
	rm -f "$_tmp"
	if ! (
		set -C
		{
			printf '{"version":1,"run":"%s","by":"watchdog","byPid":%s,"noticedIso":"%s","finishedIso":"%s","owner":' \
				"$run_id" "$$" "$_iso" "$_end"
			if [ -f "$_stub" ] && [ ! -L "$_stub" ]; then
				cat "$_stub" || printf '{}'
			else
				printf '{}'
			fi
			printf ',"items":[%s]}\n' "$fate_items"
		} >"$_tmp"
	); then
		log "could not write the run's fate"
		rm -f "$_tmp"
		return 0
	fi
	# Never over another fate (a sweep's of the same run, in the same
	# second): a hard link fails where the name is taken, and the next
	# millisecond is tried.
	_ms=0
	while [ "$_ms" -lt 1000 ]; do
		_dst=$_fates/$run_id-$_secs$(printf '%03d' "$_ms").json
		if ln "$_tmp" "$_dst" 2>/dev/null; then
			rm -f "$_tmp"
			log "fate written: $_dst"
			return 0
		fi
		# No hard links on this file system: a rename, to a free name.
		if [ ! -e "$_dst" ] && [ ! -L "$_dst" ] && mv -f "$_tmp" "$_dst"; then
			log "fate written: $_dst"
			return 0
		fi
		_ms=$((_ms + 1))
	done
	log "could not write the run's fate"
	rm -f "$_tmp"
}
write_fate

# ---------------------------------------------------------------------------
# Ledger files.

if [ "$clean_s" = yes ] && [ "$clean_n" = yes ] && [ "$kept_s" = ' ' ] && [ "$kept_n" = ' ' ]; then
	# Line files before the record: a reader never sees names without a record.
	rm -f "$sb_file" "$net_file"
	if [ -e "$runs_dir/$run_id.processes" ]; then
		# The run's local processes have a watchdog of their own, which
		# deletes the record once it is done with them.
		log "everything removed; the record stays for the watchdog of the run's processes"
		exit 0
	fi
	# The owner's stub before the record: once the record is gone, nothing
	# of the run is left.
	rm -f "${runs_dir%/*}/fates/.$run_id.owner"
	rm -f "$rec" "$own_rec"
	log "everything removed; ledger files deleted"
	exit 0
fi

# write_list FILE SET: replaces FILE atomically with the names of SET, one
# per line, when FILE is a regular file (never through a link).
write_list() {
	if [ -L "$1" ] || [ ! -f "$1" ]; then
		return 0
	fi
	_tmp=$runs_dir/.${1##*/}.tmp.$$
	rm -f "$_tmp"
	# noclobber: never write through something planted at the temporary name.
	if (
		set -C
		for _tok in $2; do
			printf '%s\n' "${_tok#*/}"
		done >"$_tmp"
	) && mv -f "$_tmp" "$1"; then
		log "$1: rewritten with what is kept"
	else
		log "$1: could not rewrite it; left as it was"
		rm -f "$_tmp"
	fi
}

# A labelled kind's list stays as it is: a superset of what lives, which
# the next sweep checks against the labels. Another kind's keeps what failed.
[ -z "$find_s" ] && [ "$last_s" -ne 0 ] && [ "$clean_s" = yes ] && write_list "$sb_file" "$kept_s"
[ -z "$find_n" ] && [ "$last_n" -ne 0 ] && [ "$clean_n" = yes ] && write_list "$net_file" "$kept_n"
log "something was kept; $rec stays for a later sweep"
exit 0
