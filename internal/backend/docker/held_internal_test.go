package docker

import (
	"errors"
	"testing"
)

// Podman's answers about an image another removal is taking away are
// asked again; anything else is an answer.
func TestImageGoing(t *testing.T) {
	for _, c := range []struct {
		msg  string
		want bool
	}{
		{`Error response from daemon: checking if image "1f3e" is dangling: reading image "1f3e": locating image with ID "1f3e": image not known`, true},
		{`Error response from daemon: failed to convert ImageData to ImageInspect 'sha256:3016': reading data blob size "manifest" for "d613": size is not known`, true},
		{"Error response from daemon: No such image: sha256:3016", false},
		{"Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?", false},
	} {
		if got := imageGoing(errors.New(c.msg)); got != c.want {
			t.Errorf("imageGoing(%q) = %v, want %v", c.msg, got, c.want)
		}
	}
	if imageGoing(nil) {
		t.Error("imageGoing(nil) = true")
	}
}
