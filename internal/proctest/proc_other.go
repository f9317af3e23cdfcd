//go:build !unix

package proctest

import (
	"errors"
	"fmt"
	"os/exec"
)

func setpgid(*exec.Cmd, bool) error {
	return fmt.Errorf("Spec.Setpgid: process groups: %w", errors.ErrUnsupported)
}

func killGroup(int) error { return fmt.Errorf("process groups: %w", errors.ErrUnsupported) }
