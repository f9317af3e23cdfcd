package apiproxy

import (
	"net/http"
	"strings"
)

// What a request is to the proxy. Paths are matched as the engines' routers
// match them: on the decoded path, after an optional version prefix, with
// Podman's own API under /libpod (versioned only).
type op int

const (
	// opForward: anything else, forwarded as it came.
	opForward op = iota
	// opCreate: a container or network create, shown to the hook.
	opCreate
	// opRemove: a removal of one container or network (or a wait, which
	// may end with one), told to the hook when the engine answered 2xx.
	opRemove
	// opHijack: attach and exec start, whose 2xx answer without framing
	// means the engine took the connection over.
	opHijack
	// opRefuse: creates what the hook cannot be asked about (a Podman pod,
	// play kube, a restore from a checkpoint): answered here, never
	// forwarded.
	opRefuse
	// opBuild: an image build, shown to the hook, its labels set in the
	// query; its body (the build context) streams as it came.
	opBuild
)

// route is what routeOf made of a request.
type route struct {
	op op
	// kinds: what a create makes, or what a removal may have removed.
	kinds []string
	// ref: the client's name or id of what an opRemove removes; "" when
	// it may have removed any of its kinds (a prune).
	ref string
	// nameInBody: a create names its object in the body ("Name"), not in
	// the query.
	nameInBody bool
	// created: the status of a create's success.
	created int
	// why: an opRefuse's reason, for the client.
	why string
}

var (
	containers = []string{KindContainer}
	networks   = []string{KindNetwork}
	volumes    = []string{KindVolume}
	images     = []string{KindImage}
	both       = []string{KindContainer, KindNetwork}
)

// Why Podman's creates that the hook cannot be asked about are refused.
const (
	refusePod = "a Podman pod cannot be guarded (its infra container goes only with the pod, which the watchdog cannot remove): " +
		"create the containers on their own, or create the pod outside the guarded test binary"
	refuseKube = "podman play kube creates pods, which cannot be guarded: " +
		"create the containers on their own, or run play kube outside the guarded test binary"
	refuseRestore = "a restore from a checkpoint may create a container the guard cannot label: " +
		"restore outside the guarded test binary"
)

// routeOf says what req is to the proxy.
func routeOf(req *http.Request) route {
	p := stripVersion(req.URL.Path)
	libpod := false
	if rest, ok := strings.CutPrefix(p, "/libpod/"); ok && p != req.URL.Path {
		libpod, p = true, "/"+rest
	}
	seg := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for _, s := range seg {
		if s == "" {
			return route{op: opForward} // the engines redirect or refuse it
		}
	}
	is := func(want ...string) bool {
		if len(seg) != len(want) {
			return false
		}
		for i, w := range want {
			if w != "*" && seg[i] != w {
				return false
			}
		}
		return true
	}
	switch req.Method {
	case http.MethodPost:
		switch {
		case is("containers", "create"):
			return route{op: opCreate, kinds: containers, nameInBody: libpod, created: http.StatusCreated}
		case is("networks", "create"):
			// Podman's own network create answers 200.
			created := http.StatusCreated
			if libpod {
				created = http.StatusOK
			}
			return route{op: opCreate, kinds: networks, nameInBody: true, created: created}
		case is("volumes", "create") && !libpod:
			return route{op: opCreate, kinds: volumes, nameInBody: true, created: http.StatusCreated}
		case is("build") && !libpod:
			return route{op: opBuild, kinds: images}
		case is("volumes", "prune"):
			return route{op: opRemove, kinds: volumes}
		case is("images", "prune"):
			return route{op: opRemove, kinds: images}
		case is("containers", "*", "attach"), is("exec", "*", "start"):
			return route{op: opHijack}
		case is("containers", "*", "wait"):
			return route{op: opRemove, kinds: containers, ref: seg[1]}
		case is("containers", "prune"):
			return route{op: opRemove, kinds: containers}
		case is("networks", "prune"):
			return route{op: opRemove, kinds: networks}
		}
		if libpod {
			switch {
			case is("pods", "create"):
				return route{op: opRefuse, why: refusePod}
			case is("play", "kube"), is("kube", "play"):
				return route{op: opRefuse, why: refuseKube}
			case is("containers", "*", "restore"):
				return route{op: opRefuse, why: refuseRestore}
			case is("pods", "prune"), is("system", "prune"):
				return route{op: opRemove, kinds: both}
			}
		}
	case http.MethodDelete:
		switch {
		case is("containers", "*"):
			return route{op: opRemove, kinds: containers, ref: seg[1]}
		case is("networks", "*"):
			return route{op: opRemove, kinds: networks, ref: seg[1]}
		case is("volumes", "*"):
			return route{op: opRemove, kinds: volumes, ref: seg[1]}
		case len(seg) >= 2 && seg[0] == "images":
			// An image is removed by a name that may hold slashes, or an
			// id: any of the run's may have gone.
			return route{op: opRemove, kinds: images}
		case libpod && (is("pods", "*") || is("play", "kube") || is("kube", "play")):
			return route{op: opRemove, kinds: both}
		}
	}
	return route{op: opForward}
}

// stripVersion removes a leading /v{version} as the engines' routers
// match it: Docker's takes digits and dots, Podman's a digit then digits,
// letters, dots and dashes; the wider is taken, so that neither engine
// routes a create the proxy did not see.
func stripVersion(p string) string {
	if len(p) < 3 || p[0] != '/' || p[1] != 'v' || p[2] < '0' || p[2] > '9' {
		return p
	}
	i := 3
	for i < len(p) && (isAlnum(p[i]) || p[i] == '.' || p[i] == '-') {
		i++
	}
	if i < len(p) && p[i] == '/' {
		return p[i:]
	}
	return p
}

func isAlnum(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
