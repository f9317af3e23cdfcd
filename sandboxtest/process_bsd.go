//go:build unix && !linux && !darwin

package sandboxtest

import "github.com/rightsize/rightsize-go/internal/proctree"

func processID(pid int) string { return proctree.ID(pid, 0) }

// watch learns nothing before Stop on this system.
func (p *Process) watch() {}
