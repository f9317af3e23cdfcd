//go:build windows

package sandboxtest

import (
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/rightsize/rightsize-go/internal/proctree"
)

// processSys holds the Job Object the command's tree is in: created with
// kill-on-close, its only handle this process's, so the tree ends when
// this process does, however it ends. Built and vetted here, not run: the
// machine the tests run on has no Windows. A process the command starts
// before it is assigned to the job (in the moment after its start) is
// not in it.
type processSys struct {
	job windows.Handle
}

func checkProcAttr(cmd *exec.Cmd) error { return nil }

// setProcessGroup gives the command a console process group of its own.
func setProcessGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.CreationFlags |= windows.CREATE_NEW_PROCESS_GROUP
}

// afterStart puts the command in a kill-on-close Job Object.
func (p *Process) afterStart() {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		warnf("sandboxtest: process %s: no job object (%v): if this process dies, the command's tree is not ended", p.cmd.Path, err)
		return
	}
	info := windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION{}
	info.BasicLimitInformation.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation, uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		windows.CloseHandle(job)
		warnf("sandboxtest: process %s: job object: %v", p.cmd.Path, err)
		return
	}
	h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, uint32(p.cmd.Process.Pid))
	if err == nil {
		err = windows.AssignProcessToJobObject(job, h)
		windows.CloseHandle(h)
	}
	if err != nil {
		windows.CloseHandle(job)
		warnf("sandboxtest: process %s: job object: %v", p.cmd.Path, err)
		return
	}
	p.sys.job = job
}

// endGroup ends the tree: the whole job at once.
func (p *Process) endGroup(grace time.Duration) proctree.Result {
	if p.sys.job == 0 {
		if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, windows.ERROR_ACCESS_DENIED) {
			return proctree.Result{Unproven: fmt.Errorf("no job object, and the command could not be ended: %w", err)}
		}
		return proctree.Result{Unproven: errors.New("no job object: the command was ended, the processes it started were not")}
	}
	var res proctree.Result
	if err := windows.TerminateJobObject(p.sys.job, 1); err != nil {
		res.Unproven = fmt.Errorf("TerminateJobObject: %w", err)
	}
	windows.CloseHandle(p.sys.job)
	p.sys.job = 0
	return res
}

func processID(pid int) string { return strconv.Itoa(pid) + ".0" }

// watch waits for the command to exit.
func (p *Process) watch() {
	h, err := windows.OpenProcess(windows.SYNCHRONIZE|windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(p.cmd.Process.Pid))
	if err != nil {
		return
	}
	defer windows.CloseHandle(h)
	if _, err := windows.WaitForSingleObject(h, windows.INFINITE); err != nil {
		return
	}
	var code uint32
	var exitErr error
	if windows.GetExitCodeProcess(h, &code) == nil && code != 0 {
		exitErr = fmt.Errorf("exit status %d", code)
	}
	p.markExited(exitErr)
}
