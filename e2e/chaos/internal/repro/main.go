//go:build ignore

package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	cache := os.Args[1]
	bin := os.Args[2]
	plan := `{"index":1,"backend":"memory","image":"chaos","steps":[{"op":"sandbox","ref":-1},{"op":"process","ref":-1},{"op":"pause","us":200000},{"op":"stop","ref":1}],"death":"both","atStep":9}`
	r, w, _ := os.Pipe()
	cmd := exec.Command(bin, "-test.run=^TestOwner$")
	cmd.Env = append(os.Environ(), "RIGHTSIZE_CACHE_DIR="+cache, "RIGHTSIZE_BACKEND=memory", "RIGHTSIZE_REAPER_DEBUG=1", "RZ_CHAOS_OWNER="+plan)
	cmd.ExtraFiles = []*os.File{w}
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	w.Close()
	sc := bufio.NewScanner(r)
	var wds []int
	delay, _ := strconv.Atoi(os.Args[3])
	for sc.Scan() {
		l := sc.Text()
		fmt.Println(l)
		if strings.Contains(l, "done 1 process") {
			ents, _ := os.ReadDir("/proc")
			for _, e := range ents {
				pid, err := strconv.Atoi(e.Name())
				if err != nil {
					continue
				}
				b, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
				f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
				if len(f) > 1 && f[1] == strconv.Itoa(cmd.Process.Pid) {
					env, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
					if strings.Contains(string(env), "RIGHTSIZE_NATIVE_WATCHDOG=1") {
						wds = append(wds, pid)
					}
				}
			}
		}
		if strings.Contains(l, "procstop") {
			time.Sleep(time.Duration(delay) * time.Microsecond)
			for _, p := range wds {
				syscall.Kill(p, syscall.SIGKILL)
			}
			cmd.Process.Kill()
			break
		}
	}
	if len(os.Args) > 4 {
		time.Sleep(50 * time.Millisecond)
		sw := exec.Command(os.Args[4], "sweep", "-v")
		if os.Args[4] == bin {
			sw = exec.Command(bin, "-test.run=^TestOwner$", "-test.v")
			sw.Env = append(sw.Env, "RZ_CHAOS_OWNER="+`{"index":2,"backend":"memory","image":"chaos","steps":[{"op":"sandbox","ref":-1}],"death":"clean","atStep":-1}`)
		}
		sw.Env = append(append(os.Environ(), "RIGHTSIZE_CACHE_DIR="+cache, "RIGHTSIZE_BACKEND=memory"), sw.Env...)
		out, err := sw.CombinedOutput()
		fmt.Printf("sweep while the owner is a zombie: %v\n%s", err, out)
	}
	cmd.Wait()
	fmt.Println("killed; watchdogs", wds)
}
