package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/rightsize/rightsize-go/internal/backend"
)

// answer is how an engine says one thing: by the HTTP status the client
// maps to an errdefs class, or by the words of its message. Docker and
// Podman (through its Docker-compatible API) say the same things
// differently, and Podman answers some of them with a bare 500: every way
// either is known to say it is here, matched without regard to case. Each
// text is tested against the engine that says it (classify_test.go).
type answer struct {
	class func(error) bool
	texts []string
}

// The table of this backend: what Docker 20.10 and Podman 4.3 answer.
var (
	// notFound: nothing of that name or id. The 404 class covers both
	// engines' API answers; the texts hold where a wrapper drops the class.
	notFound = answer{cerrdefs.IsNotFound, []string{
		// Docker: "No such container: x", "No such exec instance: id".
		// Podman: `no container with name or ID "x" found: no such
		// container`, "no exec session with ID id found: no such exec
		// session".
		"no such container", "no such exec",
		"no container with name or id",
		// Podman, networks: an inspect says "unable to find network with
		// name or ID x: network not found", a removal "network not found".
		"unable to find network", "network not found",
		// Podman, a container that another call is removing at that
		// moment: "container id does not exist in database: no such
		// container".
		"does not exist in database",
	}}
	// nameTaken: a create whose name another container has. Docker: 409
	// `Conflict. The container name "/x" is already in use by container
	// "id"`; Podman: 500 `the container name "x" is already in use by id`.
	// The 409 class alone is not enough: Docker answers other conflicts
	// (a removal already in progress) with it too.
	nameTaken = answer{nil, []string{"is already in use by"}}
	// removing: a removal refused because another is under way (the
	// engine's own, for an auto-remove container that stopped). Docker:
	// 409 "removal of container x is already in progress".
	removing = answer{nil, []string{"is already in progress"}}
	// inUse: a network removal refused while containers are attached.
	// Docker: 403 "error while removing network: network x id y has active
	// endpoints"; Podman: 500 `"x" has associated containers with it. Use
	// -f to forcibly delete containers and pods: network is being used`.
	inUse = answer{nil, []string{
		"active endpoints",
		"has associated containers with it", "network is being used",
	}}
	// ambiguous: a lookup by a name several networks have, which Docker
	// allows (a create without CheckDuplicate, the default of API 1.41):
	// 400 "network x is ambiguous (2 matches found based on name)" from a
	// removal, "2 matches found based on name: network x is ambiguous"
	// from an inspect. Podman refuses a second network of a name.
	ambiguous = answer{nil, []string{"is ambiguous"}}
	// noShell: an exec whose /bin/sh is not in the image; the engine writes
	// it into the exec's output, and records 126 (Docker) or 127 (Podman).
	// Docker: `OCI runtime exec failed: exec failed: unable to start
	// container process: exec: "/bin/sh": stat /bin/sh: no such file or
	// directory`; Podman: "OCI runtime attempted to invoke a command that
	// was not found".
	noShell = answer{nil, []string{`exec: "/bin/sh"`, "command that was not found"}}
)

// says reports whether err is the answer a.
func (a answer) says(err error) bool {
	if err == nil {
		return false
	}
	if a.class != nil && a.class(err) {
		return true
	}
	return a.saysText(err.Error())
}

// saysText reports whether msg holds one of a's texts.
func (a answer) saysText(msg string) bool {
	msg = strings.ToLower(msg)
	for _, t := range a.texts {
		if strings.Contains(msg, strings.ToLower(t)) {
			return true
		}
	}
	return false
}

// Classify maps an error of the engine's API to the backend's errors,
// whichever engine gave it: it wraps backend.ErrNotFound, ErrInUse,
// ErrNameTaken or ErrUnreachable when the engine said so, and is prefixed
// with what. Other errors are wrapped as they are; nil stays nil.
func Classify(what string, err error) error { return classify(what, err) }

// IsRemoving reports whether err is the engine's refusal of a removal
// because another removal of the same container is under way.
func IsRemoving(err error) bool { return removing.says(err) }

// classify maps an engine error to the backend's errors.
func classify(what string, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	switch {
	case notFound.says(err):
		return fmt.Errorf("%s: %w", what, backend.ErrNotFound)
	case inUse.says(err):
		return fmt.Errorf("%s: %w: %s", what, backend.ErrInUse, msg)
	case nameTaken.says(err):
		return fmt.Errorf("%s: %w: %s", what, backend.ErrNameTaken, msg)
	case client.IsErrConnectionFailed(err), errors.Is(err, os.ErrPermission),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return fmt.Errorf("%s: %w: %s", what, backend.ErrUnreachable, msg)
	default:
		return fmt.Errorf("%s: %w", what, err)
	}
}
