#!/usr/bin/env bash
# kube.sh: the Kubernetes test cluster: a real etcd, kube-apiserver and
# kube-controller-manager on loopback and, where one can run (root on
# Linux, with containerd, runc and the CNI plugins, which root on Debian
# installs), a node: kube-scheduler, a kubelet and a containerd of the
# cluster's own, whose pods really run (`make kube`, and the Kubernetes gate
# of `make test`). Without a node, pods are stored and garbage-collected,
# never scheduled or run.
#
#   kube.sh build       build kube-apiserver, kube-controller-manager,
#                       kube-scheduler and kubelet from the module in
#                       scripts/kube/build into
#                       $CACHE/<version>/, once: nothing to do when all
#                       are there; says how long it took
#   kube.sh built       exit 0 when the binaries are in the cache
#   kube.sh start       start the cluster and print its kubeconfig's path
#                       (the only line on stdout); nothing to do but print
#                       it when the cluster already answers
#   kube.sh stop        stop what start started and remove its state
#   kube.sh status      exit 0 when the cluster answers
#   kube.sh kubeconfig  print the kubeconfig's path, start nothing
#   kube.sh node        print the node's containerd socket (images for the
#                       pods are imported there: `ctr -a SOCKET -n k8s.io
#                       images import`) and exit 0 when the node is ready;
#                       otherwise say why there is none and exit 1
#   kube.sh available   exit 0 when the cluster can run here; otherwise say
#                       why not and exit 1
#
# The binaries are built with the Go toolchain through the module proxy
# (CGO_ENABLED=0): kube-apiserver and kube-controller-manager took 459 s and
# 97 s here from cold caches on 2 cores (163 MB and 144 MB), kube-scheduler
# and kubelet about 45 s more once those were built (111 MB and 126 MB). etcd is Debian's etcd-server, installed by start as root on Debian
# or Ubuntu when no etcd is on the PATH. On a host whose init starts
# packaged services, that install also starts Debian's own etcd service (on
# port 2379); the cluster never uses it.
#
# start makes, in its state folder: a CA and a serving certificate for
# 127.0.0.1 (both servers use it) and the service-account keys (openssl), a token file with two
# users (the tests' admin and the controller-manager, both in
# system:masters), and a kubeconfig for each. It then starts etcd,
# kube-apiserver (RBAC, the service-account keys, the token file) and
# kube-controller-manager (the controllers below, no leader election), each
# detached in its own session with its log in the state folder, and waits
# until the apiserver's /readyz and the controller-manager's /healthz say
# ok. Every process listens on 127.0.0.1 only, on ports of its own.
#
# Controllers: the garbage collector (it deletes the objects whose owners
# are gone: the thing the kubernetes backend relies on), the namespace
# controller (deleting a namespace deletes what is in it), the
# service-account controller (it makes each namespace's `default`
# ServiceAccount, without which the apiserver admits no pod) and the node
# lifecycle controller (it lifts a new node's not-ready taint).
#
# The node, rightsize-node: a containerd with its state, sockets and runc
# state in the state folder and the CRI plugin on, its pods on a bridge of
# their own (rzkube0, 10.244.0.0/24, host-local addresses, no NAT, no host
# ports), its pod sandbox this module's internal/kubetest/pause, built at
# start and imported (nothing is pulled: the pods' images must be imported
# too, see `node`); the kubelet
# (cgroupfs, cgroup v1 allowed, serving on the node's address only and to
# the apiserver's client certificate alone, its pods' logs in the state
# folder, no iptables chains of its own) and kube-scheduler. The kernel
# settings the kubelet changes as it starts are saved before and put back
# by stop. Where a node cannot start, the cluster runs without one and
# says why (RIGHTSIZE_KUBE_NODE=1 makes that an error). The node's address is
# RIGHTSIZE_KUBE_NODE_IP, put on the loopback interface while the node
# runs: the apiserver reaches the kubelet there for logs, exec and
# port-forward, and a kubelet refuses a 127.x address. stop ends the
# pods' containers, unmounts what the node mounted under the state folder
# and removes the bridge and the address.
#
# Environment (all optional):
#   RIGHTSIZE_KUBE_CACHE         the binaries' cache ($HOME/.cache/rightsize-kube)
#   RIGHTSIZE_KUBE_DIR           the state folder (/run/rightsize-kube as root,
#                                $XDG_RUNTIME_DIR/rightsize-kube otherwise)
#   RIGHTSIZE_KUBE_TIMEOUT       seconds start waits for the cluster  (60)
#   RIGHTSIZE_KUBE_BUILD_BUDGET  seconds build may take; past it the build is
#                                stopped and fails (0, the default: no bound).
#                                What was compiled stays in Go's build cache
#   RIGHTSIZE_KUBE_ETCD_PORT     etcd's client port; its peer port is the next (12379)
#   RIGHTSIZE_KUBE_APISERVER_PORT  kube-apiserver's port  (16443)
#   RIGHTSIZE_KUBE_CM_PORT       kube-controller-manager's health port  (10357);
#                                kube-scheduler's is the one after the next
#   RIGHTSIZE_KUBE_NODE          0: start no node; 1: a node that cannot
#                                start fails start (default: a node where
#                                one can run, said why where not)
#   RIGHTSIZE_KUBE_NODE_IP       the node's address  (10.244.255.1)
set -euo pipefail

say() { printf 'kube: %s\n' "$*" >&2; }
die() {
	say "$*"
	exit 1
}

# shellcheck source=scripts/lib.sh
. "$(dirname "$(realpath "${BASH_SOURCE[0]}")")/lib.sh"

HERE=$(dirname "$(realpath "${BASH_SOURCE[0]}")")
BUILD_MOD=$HERE/kube/build
# The version is the one the build module requires: go.mod is its one place.
VERSION=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$BUILD_MOD/go.mod")
[ -n "$VERSION" ] || die "no k8s.io/kubernetes requirement in $BUILD_MOD/go.mod"
CACHE=${RIGHTSIZE_KUBE_CACHE:-${HOME:-/root}/.cache/rightsize-kube}
BIN=$CACHE/$VERSION
BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubelet)
if is_root; then
	DIR=${RIGHTSIZE_KUBE_DIR:-/run/rightsize-kube}
else
	DIR=${RIGHTSIZE_KUBE_DIR:-${XDG_RUNTIME_DIR:-/tmp/rightsize-kube-$(id -u)}/rightsize-kube}
fi
TIMEOUT=${RIGHTSIZE_KUBE_TIMEOUT:-60}
BUDGET=${RIGHTSIZE_KUBE_BUILD_BUDGET:-0}
ETCD_PORT=${RIGHTSIZE_KUBE_ETCD_PORT:-12379}
ETCD_PEER_PORT=$((ETCD_PORT + 1))
API_PORT=${RIGHTSIZE_KUBE_APISERVER_PORT:-16443}
CM_PORT=${RIGHTSIZE_KUBE_CM_PORT:-10357}
SCHED_PORT=$((CM_PORT + 2))
NODE=${RIGHTSIZE_KUBE_NODE:-}
NODE_IP=${RIGHTSIZE_KUBE_NODE_IP:-10.244.255.1}
NODE_NAME=rightsize-node
NODE_DIR=$DIR/node
BRIDGE=rzkube0
POD_SUBNET=10.244.0.0/24
PAUSE_IMAGE=rightsize.test/pause:1
KUBECONFIG_PATH=$DIR/kubeconfig
# Marks a state folder as start's, so that stop removes no other.
MARK=.rightsize-kube
CONTROLLERS=garbage-collector-controller,namespace-controller,serviceaccount-controller,node-lifecycle-controller
# The order start starts them in; stop ends them in reverse.
PROCS=(etcd kube-apiserver kube-controller-manager containerd kube-scheduler kubelet)

for v in TIMEOUT BUILD_BUDGET ETCD_PORT APISERVER_PORT CM_PORT; do
	env=RIGHTSIZE_KUBE_$v
	case ${!env:-0} in
	*[!0-9]*) die "$env must be a whole number of seconds or a port, not '${!env}'" ;;
	esac
done

built() {
	local b
	for b in "${BINARIES[@]}"; do
		[ -x "$BIN/$b" ] || return 1
	done
}

# build: each missing binary into a temporary file beside its place, moved
# there when whole, so that a stopped build leaves no half binary to be
# taken for a built one. Two builds at once: the second waits on a lock.
build() {
	built && return 0
	command -v go >/dev/null 2>&1 || die "no go command on the PATH: the binaries are built with the Go toolchain"
	mkdir -p "$BIN"
	exec 8>>"$BIN/.lock"
	flock -w 3600 8 || die "another kube.sh build holds $BIN/.lock for over an hour"
	built && return 0
	local b start=$SECONDS t=() left
	command -v timeout >/dev/null 2>&1 || [ "$BUDGET" -eq 0 ] || die "RIGHTSIZE_KUBE_BUILD_BUDGET needs timeout(1)"
	# The gitVersion is what /version and the binaries' --version report.
	local ldflags="-X k8s.io/component-base/version.gitVersion=$VERSION -X k8s.io/client-go/pkg/version.gitVersion=$VERSION"
	for b in "${BINARIES[@]}"; do
		[ -x "$BIN/$b" ] && continue
		if [ "$BUDGET" -gt 0 ]; then
			left=$((BUDGET - (SECONDS - start)))
			[ "$left" -gt 0 ] || die "the build budget (${BUDGET}s) is spent before $b"
			t=(timeout -k 10 "$left")
		fi
		say "building $b $VERSION into $BIN (CGO_ENABLED=0 go build in $BUILD_MOD)"
		local s=$SECONDS rc=0
		(cd "$BUILD_MOD" && CGO_ENABLED=0 "${t[@]}" go build -ldflags "$ldflags" -o "$BIN/.$b.tmp" "k8s.io/kubernetes/cmd/$b") || rc=$?
		if [ "$rc" -ne 0 ]; then
			rm -f "$BIN/.$b.tmp"
			if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
				die "building $b went past the build budget (${BUDGET}s in all); what was compiled stays in Go's build cache, so the next build goes on from there"
			fi
			die "building $b failed (exit $rc; go's message is above)"
		fi
		mv "$BIN/.$b.tmp" "$BIN/$b"
		say "built $b in $((SECONDS - s)) s ($(du -m "$BIN/$b" | cut -f1) MB)"
	done
	say "the binaries are in $BIN (built in $((SECONDS - start)) s)"
}

# available: Linux, the binaries built or buildable, and etcd, openssl and
# curl here or installable. Prints what is missing.
missing() {
	if [ "$(uname -s)" != Linux ]; then
		echo "Linux (this is $(uname -s))"
		return
	fi
	built || command -v go >/dev/null 2>&1 || {
		echo "the go command, to build the binaries into $BIN"
		return
	}
	local tool
	for tool in etcd openssl curl; do
		if ! command -v "$tool" >/dev/null 2>&1 && ! { is_root && is_debian; }; then
			echo "$tool (only root on Debian or Ubuntu installs it from here)"
			return
		fi
	done
}

ensure_tools() {
	local pkgs=()
	command -v etcd >/dev/null 2>&1 || pkgs+=(etcd-server)
	command -v openssl >/dev/null 2>&1 || pkgs+=(openssl)
	command -v curl >/dev/null 2>&1 || pkgs+=(curl)
	[ ${#pkgs[@]} -eq 0 ] && return 0
	if ! is_root || ! is_debian; then
		die "missing: ${pkgs[*]}: install them with your system's tools (as root on Debian or Ubuntu this script runs apt-get install)"
	fi
	apt_install "${pkgs[@]}"
}

# get PORT PATH TOKEN: GET https://127.0.0.1:PORT/PATH with the cluster's
# CA and TOKEN, within 5 s; prints the body.
get() {
	curl -s -m 5 --cacert "$DIR/ca.crt" -H "Authorization: Bearer $3" "https://127.0.0.1:$1/$2" 2>/dev/null
}

# answers: the apiserver is ready and the controller-manager healthy.
answers() {
	[ -r "$DIR/admin.token" ] && [ -r "$DIR/ca.crt" ] || return 1
	local token
	token=$(cat "$DIR/admin.token")
	[ "$(get "$API_PORT" readyz "$token")" = ok ] && [ "$(get "$CM_PORT" healthz "$token")" = ok ]
}

# ours NAME: the pid file of NAME names a live process whose command line
# names the state folder (each of the three is given files in it), so that
# a pid reused by something else is never signalled. It holds from the
# launch on, before nohup and setsid have exec'd the program.
ours() {
	local pidfile=$DIR/$1.pid pid
	pidfile_live "$pidfile" || return 1
	pid=$(cat "$pidfile")
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$DIR/"
}

# port_free PORT: nothing listens on 127.0.0.1:PORT (bash's /dev/tcp,
# within 2 s).
port_free() {
	! timeout 2 bash -c ": </dev/tcp/127.0.0.1/$1" 2>/dev/null
}

openssl_q() { openssl "$@" >/dev/null 2>&1 || die "openssl $1 failed: openssl $*"; }

make_keys() {
	local d=$DIR
	openssl_q ecparam -name prime256v1 -genkey -noout -out "$d/ca.key"
	openssl_q req -x509 -new -key "$d/ca.key" -subj /CN=rightsize-kube-ca -days 30 -out "$d/ca.crt"
	openssl_q ecparam -name prime256v1 -genkey -noout -out "$d/serving.key"
	openssl_q req -new -key "$d/serving.key" -subj /CN=rightsize-kube -out "$d/serving.csr"
	printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$d/serving.ext"
	openssl_q x509 -req -in "$d/serving.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
		-days 30 -extfile "$d/serving.ext" -out "$d/serving.crt"
	# The apiserver's client certificate for the kubelet, which admits no
	# one else.
	openssl_q ecparam -name prime256v1 -genkey -noout -out "$d/kubelet-client.key"
	openssl_q req -new -key "$d/kubelet-client.key" -subj /O=system:masters/CN=kube-apiserver-kubelet-client -out "$d/kubelet-client.csr"
	printf 'extendedKeyUsage=clientAuth\n' >"$d/kubelet-client.ext"
	openssl_q x509 -req -in "$d/kubelet-client.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
		-days 30 -extfile "$d/kubelet-client.ext" -out "$d/kubelet-client.crt"
	openssl_q genrsa -out "$d/sa.key" 2048
	openssl_q rsa -in "$d/sa.key" -pubout -out "$d/sa.pub"
	local admin cm
	admin=$(openssl rand -hex 32) || die "openssl rand failed"
	cm=$(openssl rand -hex 32) || die "openssl rand failed"
	printf '%s\n' "$admin" >"$d/admin.token"
	# token,user,uid,"group,..."
	{
		printf '%s,rightsize-admin,rightsize-admin,"system:masters"\n' "$admin"
		printf '%s,system:kube-controller-manager,system:kube-controller-manager,"system:masters"\n' "$cm"
	} >"$d/tokens.csv"
	write_kubeconfig "$d/kubeconfig" rightsize-admin "$admin"
	write_kubeconfig "$d/controller-manager.kubeconfig" kube-controller-manager "$cm"
}

write_kubeconfig() {
	local ca
	ca=$(base64 -w0 <"$DIR/ca.crt")
	cat >"$1.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: rightsize-kube
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $ca
users:
- name: $2
  user:
    token: $3
contexts:
- name: rightsize-kube
  context:
    cluster: rightsize-kube
    user: $2
current-context: rightsize-kube
EOF
	mv "$1.tmp" "$1"
}

# launch NAME CMD...: start CMD detached, its log in $DIR/NAME.log and its
# pid in $DIR/NAME.pid.
LAUNCHED=()
launch() {
	local name=$1
	shift
	start_detached "$DIR/$name.log" "$@"
	echo "$DETACHED_PID" >"$DIR/$name.pid"
	LAUNCHED+=("$name")
}

# wait_for WHAT CHECK...: poll CHECK until it succeeds, the deadline passes
# or one of the launched processes has exited; then $ON_FAIL (fail_start,
# which exits, or node_fail, after which wait_for returns 1).
ON_FAIL=fail_start
wait_for() {
	local what=$1 p
	shift
	until "$@"; do
		for p in "${LAUNCHED[@]}"; do
			ours "$p" || {
				"$ON_FAIL" "$p exited" "$p"
				return 1
			}
		done
		[ "$SECONDS" -lt "$DEADLINE" ] || {
			"$ON_FAIL" "$what did not answer within ${TIMEOUT}s" "${LAUNCHED[@]}"
			return 1
		}
		sleep 0.2
	done
}

# fail_start WHY NAME...: say why, show the end of the logs of NAME..., stop
# everything and exit 1.
fail_start() {
	local why=$1 p
	shift
	say "$why; the state is in $DIR"
	for p in "$@"; do
		say "the end of $DIR/$p.log:"
		tail -n 15 "$DIR/$p.log" >&2 2>/dev/null || true
	done
	stop_procs
	undo_node
	exit 1
}

etcd_answers() { curl -s -m 2 "http://127.0.0.1:$ETCD_PORT/health" 2>/dev/null | grep -q '"health":"true"'; }
api_ready() { [ "$(get "$API_PORT" readyz "$(cat "$DIR/admin.token")")" = ok ]; }
cm_healthy() { [ "$(get "$CM_PORT" healthz "$(cat "$DIR/admin.token")")" = ok ]; }

DEADLINE=
start() {
	if answers; then
		echo "$KUBECONFIG_PATH"
		return 0
	fi
	[ "$(uname -s)" = Linux ] || die "the test cluster runs on Linux only"
	built || die "kube-apiserver and kube-controller-manager $VERSION are not in $BIN: run \`bash scripts/kube.sh build\` (or \`make kube\`) first"
	ensure_tools
	# The tokens and keys are for this user only.
	umask 077
	mkdir -p "$DIR"
	if [ ! -e "$DIR/$MARK" ]; then
		[ -z "$(ls -A "$DIR")" ] || die "$DIR holds files that are not the test cluster's; point RIGHTSIZE_KUBE_DIR at an empty or new folder"
		: >"$DIR/$MARK"
	fi
	chmod 700 "$DIR"
	exec 9>>"$DIR.lock"
	flock -w $((TIMEOUT + 60)) 9 || die "another kube.sh holds $DIR.lock for too long"
	if answers; then
		echo "$KUBECONFIG_PATH"
		return 0
	fi
	# What is left of an earlier start that does not answer is a test
	# cluster's and holds nothing to keep: begin again.
	stop_procs
	undo_node
	still_mounted
	find "$DIR" -mindepth 1 -maxdepth 1 ! -name "$MARK" -exec rm -rf {} +
	local port
	for port in "$ETCD_PORT" "$ETCD_PEER_PORT" "$API_PORT" "$CM_PORT"; do
		port_free "$port" || die "127.0.0.1:$port is in use by another process; choose other ports (RIGHTSIZE_KUBE_ETCD_PORT, RIGHTSIZE_KUBE_APISERVER_PORT, RIGHTSIZE_KUBE_CM_PORT)"
	done
	make_keys
	DEADLINE=$((SECONDS + TIMEOUT))
	local etcd_url=http://127.0.0.1:$ETCD_PORT peer_url=http://127.0.0.1:$ETCD_PEER_PORT
	say "starting etcd $(etcd --version 2>/dev/null | awk '/etcd Version/ { print $3 }') on 127.0.0.1:$ETCD_PORT"
	launch etcd etcd --name rightsize --data-dir "$DIR/etcd" \
		--listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
		--listen-peer-urls "$peer_url" --initial-advertise-peer-urls "$peer_url" \
		--initial-cluster "rightsize=$peer_url"
	wait_for etcd etcd_answers
	say "starting kube-apiserver $VERSION on 127.0.0.1:$API_PORT"
	launch kube-apiserver "$BIN/kube-apiserver" \
		--bind-address=127.0.0.1 --secure-port="$API_PORT" \
		--advertise-address=127.0.0.1 --endpoint-reconciler-type=none \
		--etcd-servers="$etcd_url" \
		--tls-cert-file="$DIR/serving.crt" --tls-private-key-file="$DIR/serving.key" \
		--token-auth-file="$DIR/tokens.csv" --authorization-mode=RBAC \
		--service-account-key-file="$DIR/sa.pub" --service-account-signing-key-file="$DIR/sa.key" \
		--service-account-issuer=https://kubernetes.default.svc \
		--service-cluster-ip-range=10.96.0.0/16 \
		--kubelet-preferred-address-types=InternalIP \
		--kubelet-client-certificate="$DIR/kubelet-client.crt" --kubelet-client-key="$DIR/kubelet-client.key"
	wait_for kube-apiserver api_ready
	say "starting kube-controller-manager $VERSION (--controllers=$CONTROLLERS)"
	launch kube-controller-manager "$BIN/kube-controller-manager" \
		--kubeconfig="$DIR/controller-manager.kubeconfig" \
		--authentication-kubeconfig="$DIR/controller-manager.kubeconfig" --authentication-skip-lookup \
		--authorization-kubeconfig="$DIR/controller-manager.kubeconfig" \
		--bind-address=127.0.0.1 --secure-port="$CM_PORT" \
		--tls-cert-file="$DIR/serving.crt" --tls-private-key-file="$DIR/serving.key" \
		--controllers="$CONTROLLERS" --leader-elect=false
	wait_for kube-controller-manager cm_healthy
	if [ "$NODE" != 0 ]; then
		local why
		why=$(node_missing)
		if [ -n "$why" ] && [ "$NODE" = 1 ]; then
			fail_start "no node can run here: missing $why" "${LAUNCHED[@]}"
		elif [ -n "$why" ]; then
			say "no node: missing $why; pods are stored and garbage-collected, never run"
		else
			[ "$NODE" = 1 ] || ON_FAIL=node_fail
			DEADLINE=$((SECONDS + TIMEOUT))
			start_node || say "no node: pods are stored and garbage-collected, never run"
			ON_FAIL=fail_start
		fi
	fi
	say "the cluster answers at https://127.0.0.1:$API_PORT (kubeconfig: $KUBECONFIG_PATH)"
	echo "$KUBECONFIG_PATH"
}

# node_missing: what a node needs that is not here and cannot be installed
# from here; empty when a node can run.
node_missing() {
	is_root || {
		echo "root (a kubelet and containerd run as root)"
		return
	}
	cni_dir >/dev/null || is_debian || {
		echo "the CNI plugins bridge, host-local and loopback (/usr/lib/cni or /opt/cni/bin)"
		return
	}
	command -v go >/dev/null 2>&1 || {
		echo "go (the node's pause is built at its start)"
		return
	}
	local tool
	for tool in containerd ctr runc ip iptables; do
		command -v "$tool" >/dev/null 2>&1 || is_debian || {
			echo "$tool (only root on Debian or Ubuntu installs it from here)"
			return
		}
	done
}

# cni_dir: the folder of the CNI plugins the node uses.
cni_dir() {
	local d
	for d in /usr/lib/cni /opt/cni/bin; do
		if [ -x "$d/bridge" ] && [ -x "$d/host-local" ] && [ -x "$d/loopback" ]; then
			echo "$d"
			return 0
		fi
	done
	return 1
}

ensure_node_tools() {
	local pkgs=()
	{ command -v containerd && command -v ctr; } >/dev/null 2>&1 || pkgs+=(containerd)
	command -v runc >/dev/null 2>&1 || pkgs+=(runc)
	command -v ip >/dev/null 2>&1 || pkgs+=(iproute2)
	cni_dir >/dev/null || pkgs+=(containernetworking-plugins)
	[ ${#pkgs[@]} -eq 0 ] || apt_install "${pkgs[@]}"
}

# node_ready: the node says Ready and carries no taint.
node_ready() {
	local body
	body=$(get "$API_PORT" "api/v1/nodes/$NODE_NAME" "$(cat "$DIR/admin.token")" | tr -d ' \n')
	case $body in
	*'"type":"Ready","status":"True"'*) ;;
	*) return 1 ;;
	esac
	case $body in
	*'"taints"'*) return 1 ;;
	esac
}

containerd_answers() { ctr -a "$NODE_DIR/containerd.sock" version >/dev/null 2>&1; }

# node_fail WHY NAME...: what fail_start does, for the node alone: say
# why, show the ends of the logs, stop the node and undo what it changed;
# the cluster runs on without it.
node_fail() {
	local why=$1 p
	shift
	say "the node did not start: $why"
	for p in "$@"; do
		case $p in containerd | kube-scheduler | kubelet) ;; *) continue ;; esac
		say "the end of $DIR/$p.log:"
		tail -n 15 "$DIR/$p.log" >&2 2>/dev/null || true
	done
	stop_procs kubelet kube-scheduler containerd
	undo_node
	still_mounted
	rm -rf "$NODE_DIR"
}

# The host settings a kubelet changes as it starts (its kernel tunables;
# bridge gateways turn forwarding on): saved before, put back by stop.
SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward)

start_node() {
	( ensure_node_tools ) || {
		"$ON_FAIL" "its tools could not be installed"
		return 1
	}
	local cni n=$NODE_DIR k
	cni=$(cni_dir) || {
		"$ON_FAIL" "the CNI plugins are not in /usr/lib/cni or /opt/cni/bin after their install"
		return 1
	}
	mkdir -p "$n/cni" "$n/opt"
	for k in "${SYSCTLS[@]}"; do
		printf '%s=%s\n' "$k" "$(sysctl -n "$k" 2>/dev/null)"
	done >"$n/sysctls"
	# containerd puts pods in a k8s.io cgroup of each hierarchy; stop
	# removes those folders where they were not there before.
	local made=1 c
	for c in /sys/fs/cgroup/k8s.io /sys/fs/cgroup/*/k8s.io; do
		[ ! -e "$c" ] || made=
	done
	[ -z "$made" ] || : >"$n/made-cgroups"
	if ! ip -o addr show dev lo | grep -qF " $NODE_IP/"; then
		ip addr add "$NODE_IP/32" dev lo || {
			"$ON_FAIL" "cannot put the node's address $NODE_IP on lo"
			return 1
		}
		: >"$n/lo-address"
	fi
	cat >"$n/containerd.toml" <<EOF
version = 2
root = "$n/containerd-root"
state = "$n/containerd-state"
[grpc]
  address = "$n/containerd.sock"
[ttrpc]
  address = "$n/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$n/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # Never below containerd's own: a root without CAP_SYS_RESOURCE (a
  # container, a micro-VM's jail) may not lower it.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "$n/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$cni"
    conf_dir = "$n/cni"
EOF
	cat >"$n/cni/10-rightsize.conflist" <<EOF
{"cniVersion":"0.4.0","name":"rightsize-kube","plugins":[
 {"type":"bridge","bridge":"$BRIDGE","isGateway":true,"ipMasq":false,
  "ipam":{"type":"host-local","ranges":[[{"subnet":"$POD_SUBNET"}]],"dataDir":"$n/cni-ipam"}}]}
EOF
	cat >"$n/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzPort: 0
# Only the apiserver's client certificate is admitted.
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $DIR/ca.crt}
authorization: {mode: AlwaysAllow}
podLogsDir: $n/pod-logs
makeIPTablesUtilChains: false
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
cgroupsPerQOS: false
enforceNodeAllocatable: []
containerRuntimeEndpoint: unix://$n/containerd.sock
evictionHard: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
resolvConf: ""
EOF
	say "starting the node $NODE_NAME at $NODE_IP: containerd $(containerd --version 2>/dev/null | awk '{ print $3 }'), kube-scheduler and kubelet $VERSION"
	launch containerd containerd --config "$n/containerd.toml"
	wait_for containerd containerd_answers || return 1
	if ! (cd "$HERE/.." && CGO_ENABLED=0 go build -o "$n/pause" ./internal/kubetest/pause); then
		"$ON_FAIL" "building internal/kubetest/pause failed" containerd
		return 1
	fi
	if ! "$n/pause" archive "$n/pause.tar" "$PAUSE_IMAGE" ||
		! ctr -a "$n/containerd.sock" -n k8s.io images import "$n/pause.tar" >/dev/null; then
		"$ON_FAIL" "the pause image could not be made or imported" containerd
		return 1
	fi
	launch kube-scheduler "$BIN/kube-scheduler" \
		--kubeconfig="$KUBECONFIG_PATH" \
		--authentication-kubeconfig="$KUBECONFIG_PATH" --authorization-kubeconfig="$KUBECONFIG_PATH" \
		--bind-address=127.0.0.1 --secure-port="$SCHED_PORT" --leader-elect=false
	launch kubelet "$BIN/kubelet" --config="$n/kubelet.yaml" --kubeconfig="$KUBECONFIG_PATH" \
		--hostname-override="$NODE_NAME" --node-ip="$NODE_IP" \
		--root-dir="$n/kubelet" --cert-dir="$n/kubelet-pki"
	wait_for "the node $NODE_NAME" node_ready
}

# stop_node_pods: end the node's pods' containers through containerd
# (which also removes their cgroups), while it still runs.
stop_node_pods() {
	ours containerd || return 0
	local c=(ctr -a "$NODE_DIR/containerd.sock" -n k8s.io) id ids
	ids=$("${c[@]}" tasks ls -q 2>/dev/null) || ids=
	for id in $ids; do
		"${c[@]}" tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
	done
	for id in $ids; do
		"${c[@]}" tasks delete --force "$id" >/dev/null 2>&1 || true
	done
	for id in $("${c[@]}" containers ls -q 2>/dev/null); do
		"${c[@]}" containers rm "$id" >/dev/null 2>&1 || true
	done
}

# still_mounted: die when anything is still mounted under the state folder
# (a mount undo_node could not undo): removing the folder would reach into
# what is mounted there.
still_mounted() {
	local m
	m=$(awk -v d="$DIR/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | head -n 3)
	[ -z "$m" ] || die "still mounted under $DIR, which is therefore not removed: $m"
}

# undo_node: what the node left beside its processes: shims, mounts under
# the state folder, the pods' bridge and cgroups, the node's address.
undo_node() {
	[ -d "$NODE_DIR" ] || return 0
	local pid m r id kv
	# Containers whose containerd is gone: their runc state is the node's.
	if command -v runc >/dev/null 2>&1; then
		for r in "$NODE_DIR"/runc/*/; do
			[ -d "$r" ] || continue
			for id in $(runc --root "$r" list -q 2>/dev/null); do
				runc --root "$r" kill "$id" KILL 2>/dev/null || true
				runc --root "$r" delete --force "$id" 2>/dev/null || true
			done
		done
	fi
	for pid in $(pgrep -f "containerd-shim.*-address $NODE_DIR/containerd.sock" 2>/dev/null); do
		kill -KILL "$pid" 2>/dev/null || true
	done
	for m in $(awk -v d="$DIR/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r); do
		umount -l "$m" 2>/dev/null || true
	done
	if ip link show "$BRIDGE" >/dev/null 2>&1; then
		ip link del "$BRIDGE" 2>/dev/null || true
	fi
	rm -f /var/lib/cni/results/rightsize-kube-* 2>/dev/null || true
	if [ -r "$NODE_DIR/sysctls" ]; then
		while IFS= read -r kv; do
			[ -z "${kv#*=}" ] || sysctl -q -w "$kv" >/dev/null 2>&1 || true
		done <"$NODE_DIR/sysctls"
	fi
	if [ -e "$NODE_DIR/made-cgroups" ]; then
		find /sys/fs/cgroup/k8s.io /sys/fs/cgroup/*/k8s.io -depth -type d -exec rmdir {} \; 2>/dev/null || true
	fi
	if [ -e "$NODE_DIR/lo-address" ]; then
		ip addr del "$NODE_IP/32" dev lo 2>/dev/null || true
	fi
}


# stop_procs [NAME...]: end the processes start started (or those named),
# newest first: SIGTERM, then SIGKILL after 10 s.
stop_procs() {
	local i p pid n procs=("${PROCS[@]}")
	[ $# -eq 0 ] || procs=("$@")
	for ((i = ${#procs[@]} - 1; i >= 0; i--)); do
		p=${procs[i]}
		[ "$p" != containerd ] || stop_node_pods
		if ours "$p"; then
			pid=$(cat "$DIR/$p.pid")
			kill "$pid" 2>/dev/null || true
			n=0
			while kill -0 "$pid" 2>/dev/null && [ "$n" -lt 100 ]; do
				sleep 0.1
				n=$((n + 1))
			done
			if kill -0 "$pid" 2>/dev/null; then
				say "$p (pid $pid) did not end on SIGTERM within 10 s; SIGKILL"
				kill -KILL "$pid" 2>/dev/null || true
			fi
		fi
		rm -f "$DIR/$p.pid"
	done
}

stop() {
	[ -d "$DIR" ] || return 0
	[ -e "$DIR/$MARK" ] || die "$DIR is not the test cluster's state folder (no $MARK in it): nothing stopped"
	exec 9>>"$DIR.lock"
	flock -w $((TIMEOUT + 60)) 9 || die "another kube.sh holds $DIR.lock for too long"
	stop_procs
	undo_node
	still_mounted
	rm -rf "$DIR"
	say "stopped the cluster and removed $DIR"
}

case ${1:-} in
build) build ;;
built) built ;;
start) start ;;
stop) stop ;;
status) answers ;;
kubeconfig) echo "$KUBECONFIG_PATH" ;;
node)
	if ! answers; then
		say "the cluster does not answer: no node"
		exit 1
	fi
	if ! ours kubelet || ! node_ready; then
		say "the cluster has no ready node (kube.sh start said why, or RIGHTSIZE_KUBE_NODE=0 was set)"
		exit 1
	fi
	echo "$NODE_DIR/containerd.sock"
	;;
available)
	why=$(missing)
	[ -z "$why" ] || {
		say "the Kubernetes test cluster cannot run here: missing $why"
		exit 1
	}
	;;
*) die "usage: kube.sh build|built|start|stop|status|kubeconfig|node|available" ;;
esac
