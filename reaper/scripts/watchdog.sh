#!/bin/sh
# rightsize-go watchdog (POSIX sh; runs unchanged under dash, bash --posix and
# busybox ash).
#
# A Go test process spawns this once, with stdin the read end of a pipe whose
# write end only that process holds. The script blocks reading stdin; at EOF
# (the owner exited: clean exit, panic, SIGKILL alike) it removes the run's
# sandboxes and networks with the engine's command line and deletes the run's
# ledger files.
#
#   sh watchdog.sh RUNS_DIR RUN_ID [STEP ...]
#   STEP := LIST MODE GONE RETRY N WORD1 ... WORDN
#
#   RUNS_DIR  absolute path of the ledger's runs folder
#   RUN_ID    file stem: RUNS_DIR/RUN_ID.json, .sandboxes, .networks
#   LIST      sandboxes | networks: the line file the names come from
#   MODE      batch: one call with every name, then one call per name if that
#             call failed; each: one call per name
#   GONE      newline-separated fixed strings: a failed call whose output holds
#             one of them means "does not exist" (exit 126/127 never do)
#   RETRY     newline-separated fixed strings: a failed call whose output holds
#             one of them is run once more after 0.5 s
#   N WORDS   the command (WORD1 an absolute program path) and its leading
#             arguments; names are appended as separate arguments
#
# The steps run twice: a second pass, RIGHTSIZE_WATCHDOG_SETTLE seconds
# (default 2; 0 for none) after the first, over the same names. A create the
# owner sent just before it died may be finished by the engine after the
# first pass found no such name; without the second pass that sandbox or
# network would be forgotten, still running. The second pass decides.
#
# Each call is bounded by RIGHTSIZE_WATCHDOG_CALL_TIMEOUT seconds (default
# 120) where timeout(1) works: an engine that never answers must not hold
# the watchdog, or its names, for ever. A call stopped for it has failed,
# whatever it printed, and every later call is skipped (failed too).
#
# The last step given for a list decides each of its names: success or GONE
# removes the name from the ledger, anything else keeps it (and the record).
# Earlier steps for the same list are best effort.
#
# File content is data, never code: names are filtered with tr, grep and sed
# to ^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$, and not fewer than 12 hex digits
# only (an engine would read those as an id prefix), before the shell sees
# them, no eval,
# no unquoted expansion of anything read from a file.

set -u

LC_ALL=C
export LC_ALL
PATH=${PATH:+$PATH:}/usr/bin:/bin
export PATH

# A terminal hangup or ^C aimed at the owner must not kill the watchdog before
# it has done its job; a closed stderr must not kill it while it logs.
trap '' HUP INT QUIT PIPE

nl='
'
run_id_for_log='?'

log() {
	printf 'rightsize watchdog [%s]: %s\n' "$run_id_for_log" "$*" >&2
}

usage() {
	log "$1"
	printf 'usage: watchdog.sh RUNS_DIR RUN_ID [LIST MODE GONE RETRY N WORD1 ... WORDN] ...\n' >&2
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

# check_steps validates the step list and records, per list, the index of the
# step that decides its names.
last_sandboxes=0
last_networks=0
check_steps() {
	_i=0
	while [ "$#" -gt 0 ]; do
		_i=$((_i + 1))
		[ "$#" -ge 6 ] || usage "step $_i: need LIST MODE GONE RETRY N WORD1..."
		case $1 in
		sandboxes) last_sandboxes=$_i ;;
		networks) last_networks=$_i ;;
		*) usage "step $_i: LIST '$1' is not sandboxes or networks" ;;
		esac
		case $2 in
		batch | each) ;;
		*) usage "step $_i: MODE '$2' is not batch or each" ;;
		esac
		case $5 in
		[1-9] | [1-9][0-9] | [1-9][0-9][0-9]) ;;
		*) usage "step $_i: N '$5' is not a number from 1 to 999" ;;
		esac
		_n=$5
		shift 5
		[ "$#" -ge "$_n" ] || usage "step $_i: N is $_n but only $# words follow"
		case $1 in
		/*) ;;
		*) usage "step $_i: program '$1' is not an absolute path" ;;
		esac
		shift "$_n"
	done
}
check_steps "$@"

for _tool in tr grep sed sort mv rm sleep; do
	command -v "$_tool" >/dev/null 2>&1 || usage "required tool '$_tool' not found in PATH"
done

# An engine that takes the connection and never answers must not hold the
# watchdog, or its names, for ever: each call is bounded by
# RIGHTSIZE_WATCHDOG_CALL_TIMEOUT seconds (a whole number from 1; default
# 120), then SIGKILLed 10 s later if it ignored the SIGTERM, where a
# timeout(1) command with -k works (coreutils; busybox from 1.30). Checked
# now, before the wait, so that the owner's death costs no probe. Elsewhere
# calls are not bounded.
call_bound=
call_kill=10
call_timeout=${RIGHTSIZE_WATCHDOG_CALL_TIMEOUT:-120}
case $call_timeout in
'' | *[!0-9]* | 0*) call_timeout=120 ;;
esac
# No redirection here: the shell would hold /dev/null in place of its own
# stdin for the probe's length. It inherits the pipe and reads nothing;
# "not found", if it comes to that, goes to the log.
if timeout -k "$call_kill" "$call_timeout" true; then
	call_bound=yes
fi
# engine_hung is set once a call got no answer in time: the engine will not
# answer the next one either, so every later call is skipped and its names
# kept, rather than each waiting out the bound in turn.
engine_hung=

# Do not pin the caller's working directory (it may be a test's temp dir).
cd / || :

# ---------------------------------------------------------------------------
# Wait. Only the read builtin runs here: no child process, no CPU, about
# 100 KiB of private memory. Whatever arrives on stdin is thrown away; read fails at EOF
# (also for a last line without newline), and that ends the loop.

while IFS= read -r _discard; do :; done
_discard=

log "owner gone (stdin closed): reaping run $run_id in $runs_dir"

rec=$runs_dir/$run_id.json
sb_file=$runs_dir/$run_id.sandboxes
net_file=$runs_dir/$run_id.networks

if [ ! -e "$rec" ] && [ ! -e "$sb_file" ] && [ ! -L "$sb_file" ] &&
	[ ! -e "$net_file" ] && [ ! -L "$net_file" ]; then
	log "no ledger files: nothing to do"
	exit 0
fi

# ---------------------------------------------------------------------------
# Names.

valid_re='[A-Za-z0-9][A-Za-z0-9_.-]{0,127}'
hex_re='[0-9A-Fa-f]{1,11}'

# normalize maps NUL to an invalid character (so rz-a<NUL>b is rejected, not
# read as rz-ab) and the other trimmable bytes to spaces; an inner tab, like an
# inner space, still makes the line invalid.
normalize() {
	tr '\000\011\013\014\015' '%    ' <"$1"
}

# read_list FILE: sets list_names (sorted, unique, newline-separated) and
# list_state: absent | read | unsafe.
read_list() {
	list_names=
	if [ -L "$1" ]; then
		log "$1 is a symbolic link: not read, left in place; the record is kept"
		list_state=unsafe
		return
	fi
	if [ ! -e "$1" ]; then
		list_state=absent
		return
	fi
	if [ ! -f "$1" ] || [ ! -r "$1" ]; then
		log "$1 is not a readable regular file: not read, left in place; the record is kept"
		list_state=unsafe
		return
	fi
	list_state='read'
	# grep first, anchored: it bounds the work sed does on hostile long lines.
	# Fewer than 12 hex digits only is refused too: the engine would read it
	# as the prefix of some other container's id.
	list_names=$(normalize "$1" | grep -E "^ *$valid_re *\$" | grep -v -E "^ *$hex_re *\$" | sed -e 's/^ *//' -e 's/ *$//' | sort -u)
}

# log_rejected FILE: says how many lines of FILE were not names. Only a log
# line, so it runs after the calls and never delays them.
log_rejected() {
	[ -f "$1" ] && [ ! -L "$1" ] && [ -r "$1" ] || return 0
	_bad=$(normalize "$1" | grep -c -v -E "^ *($valid_re)? *\$")
	_hex=$(normalize "$1" | grep -E "^ *$valid_re *\$" | grep -c -E "^ *$hex_re *\$")
	_bad=$((${_bad:-0} + ${_hex:-0}))
	case $_bad in
	0) ;;
	*) log "$1: skipped $_bad invalid line(s); they are dropped from the ledger" ;;
	esac
}

# The sandboxes are read at once, the networks only when their first step
# comes: the first removal starts as early as it can.
read_list "$sb_file"
sb_names=$list_names
sb_state=$list_state
net_names=
net_state=unread
load_networks() {
	[ "$net_state" = unread ] || return 0
	read_list "$net_file"
	net_names=$list_names
	net_state=$list_state
	log "networks: $(count_names "$net_names") name(s)"
}

count_names() {
	_c=0
	while IFS= read -r _name; do
		[ -n "$_name" ] && _c=$((_c + 1))
	done <<EOF
$1
EOF
	printf '%s' "$_c"
}
log "sandboxes: $(count_names "$sb_names") name(s)"

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
# Bounded in time where timeout(1) works (see call_bound above).
call() {
	if [ -n "$call_bound" ]; then
		call_out=$(timeout -k "$call_kill" "$call_timeout" "$@" </dev/null 2>&1)
	else
		call_out=$("$@" </dev/null 2>&1)
	fi
	call_rc=$?
}

# classify: sets call_result from call_rc and call_out: ok | gone | retry | fail.
# A batch call is never "gone": its output cannot say which name is missing.
classify() {
	if [ "$call_rc" -eq 0 ]; then
		call_result=ok
	elif timed_out; then
		# Whatever it printed before it was stopped decides nothing.
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

# timed_out: whether the last call was stopped by its time bound. coreutils'
# timeout exits 124; busybox's ends the call with SIGTERM (143); either
# ends it with SIGKILL (137) when it ignored the SIGTERM. A program that a
# signal from elsewhere ended the same way is taken for a hung one too:
# its names are kept, which is never wrong, only later.
timed_out() {
	[ -n "$call_bound" ] || return 1
	case $call_rc in
	124 | 137 | 143) return 0 ;;
	esac
	return 1
}

log_call() {
	if timed_out; then
		log "$step_label $1: exit $call_rc: no answer within ${call_timeout}s, stopped ($call_result); later calls are skipped"
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

# batch_attempt CMD...: one call with every name in $step_names appended.
batch_attempt() {
	while IFS= read -r _name; do
		[ -n "$_name" ] && set -- "$@" "$_name"
	done <<EOF
$step_names
EOF
	call_batch=yes
	attempt "batch of $(count_names "$step_names")" "$@"
	call_batch=no
}

# each_attempt CMD...: one call per name; appends undecided names to step_kept.
each_attempt() {
	while IFS= read -r _name; do
		[ -n "$_name" ] || continue
		attempt "$_name" "$@" "$_name"
		case $call_result in
		ok | gone) ;;
		*) step_kept=$step_kept$_name$nl ;;
		esac
	done <<EOF
$step_names
EOF
}

# run_step WORD1..WORDN REST...: runs the current step (step_* globals) with
# its first $step_n arguments as the command; the rest belongs to later steps.
run_step() {
	_total=$#
	_k=0
	while [ "$_k" -lt "$_total" ]; do
		_k=$((_k + 1))
		[ "$_k" -le "$step_n" ] && set -- "$@" "$1"
		shift
	done
	step_kept=
	if [ ! -f "$1" ] || [ ! -x "$1" ]; then
		log "$step_label: program '$1' is not an executable file: every $step_list name is kept"
		step_unrunnable=yes
		return
	fi
	step_unrunnable=no
	if [ "$step_mode" = batch ]; then
		batch_attempt "$@"
		[ "$call_result" = ok ] && return
		log "$step_label: the batch call failed; one name at a time"
	fi
	each_attempt "$@"
}

call_batch=no

# run_steps STEP...: one pass of every step over sb_names and net_names; sets
# sb_kept, net_kept, sb_forced, net_forced.
run_steps() {
	sb_kept=
	net_kept=
	sb_forced=no
	net_forced=no
	step_i=0
	while [ "$#" -gt 0 ]; do
		step_i=$((step_i + 1))
		step_list=$1
		step_mode=$2
		step_gone=$3
		step_retry=$4
		step_n=$5
		shift 5
		case $step_list in
		sandboxes)
			step_names=$sb_names
			step_last=$last_sandboxes
			;;
		*)
			load_networks
			step_names=$net_names
			step_last=$last_networks
			;;
		esac
		step_label="step $step_i ($step_list $step_mode)"
		if [ -z "$step_names" ]; then
			log "$step_label: no names"
			shift "$step_n"
			continue
		fi
		run_step "$@"
		shift "$step_n"
		if [ "$step_unrunnable" = yes ]; then
			case $step_list in
			sandboxes) sb_forced=yes ;;
			*) net_forced=yes ;;
			esac
		fi
		if [ "$step_i" -eq "$step_last" ]; then
			case $step_list in
			sandboxes) sb_kept=$step_kept ;;
			*) net_kept=$step_kept ;;
			esac
		fi
	done
}

run_steps "$@"
load_networks
settle=${RIGHTSIZE_WATCHDOG_SETTLE:-2}
case $settle in
'' | *[!0-9.]* | .*) settle=2 ;;
esac
case $settle in
0 | 0.0) ;;
*)
	if [ -n "$sb_names$net_names" ] && [ -z "$engine_hung" ]; then
		log "second pass in ${settle}s: a create sent just before the owner died may finish after the first"
		sleep "$settle" 2>/dev/null || sleep 2
		run_steps "$@"
	fi
	;;
esac

# A list whose names were never decided by a runnable last step keeps them all.
if [ "$sb_forced" = yes ] || [ "$last_sandboxes" -eq 0 ]; then
	sb_kept=$sb_names
	[ "$last_sandboxes" -eq 0 ] && [ -n "$sb_names" ] && log "no step for sandboxes: every sandbox name is kept"
fi
if [ "$net_forced" = yes ] || [ "$last_networks" -eq 0 ]; then
	net_kept=$net_names
	[ "$last_networks" -eq 0 ] && [ -n "$net_names" ] && log "no step for networks: every network name is kept"
fi

# ---------------------------------------------------------------------------
# Ledger files.

log_rejected "$sb_file"
log_rejected "$net_file"

if [ -z "$sb_kept" ] && [ -z "$net_kept" ] && [ "$sb_state" != unsafe ] && [ "$net_state" != unsafe ]; then
	# Line files before the record: a reader never sees names without a record.
	rm -f "$sb_file" "$net_file"
	rm -f "$rec"
	log "everything removed; ledger files deleted"
	exit 0
fi

# print_names NAMES: one name a line, blank entries skipped.
print_names() {
	while IFS= read -r _name; do
		[ -n "$_name" ] && printf '%s\n' "$_name"
	done <<EOF
$1
EOF
	return 0
}

# write_list FILE NAMES: replaces FILE atomically with NAMES, one per line.
write_list() {
	_tmp=$runs_dir/.${1##*/}.tmp.$$
	rm -f "$_tmp"
	# noclobber: never write through something planted at the temporary name.
	if (
		set -C
		print_names "$2" >"$_tmp"
	) && mv -f "$_tmp" "$1"; then
		log "$1: kept $(count_names "$2") name(s)"
	else
		log "$1: could not rewrite it; left as it was"
		rm -f "$_tmp"
	fi
}

[ "$sb_state" = read ] && write_list "$sb_file" "$sb_kept"
[ "$net_state" = read ] && write_list "$net_file" "$net_kept"
log "something was kept; $rec stays for a later sweep"
exit 0
